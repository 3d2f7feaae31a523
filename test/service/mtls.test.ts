/**
 * Optional mutual TLS for controllers: a client certificate signed by tls.clientCa whose
 * subject CN is a controller's name authenticates as that controller; machines (and anyone
 * without a certificate) still connect and use bearer tokens.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { type Served, serve } from "./serve-harness.ts";

let dir: string;
let server: Served;
const TOKEN = randomBytes(32).toString("base64url");

function openssl(args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
}

function certificate(name: string, cn: string, ext?: string): void {
  openssl([
    "req",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.csr`,
    "-subj",
    `/CN=${cn}`,
  ]);
  const extArgs = ext ? ["-extfile", ext] : [];
  openssl([
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    "ca.crt",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-out",
    `${name}.crt`,
    "-days",
    "1",
    ...extArgs,
  ]);
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "bootseal-mtls-"));
  openssl([
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-keyout",
    "ca.key",
    "-out",
    "ca.crt",
    "-subj",
    "/CN=bootseal-test-ca",
    "-days",
    "1",
  ]);
  writeFileSync(join(dir, "server.ext"), "subjectAltName=IP:127.0.0.1\n");
  certificate("server", "127.0.0.1", "server.ext");
  certificate("ops", "ops-cert");
  certificate("stranger", "nobody");
  const recipient = await identityToRecipient(await generateX25519Identity());
  server = await serve(
    dir,
    "mtls",
    {
      store: `file://${join(dir, "store")}`,
      tls: { cert: "server.crt", key: "server.key", clientCa: "ca.crt" },
      creation_rules: [{ age: recipient }],
      controllers: [
        { name: "ops-cert", scopes: ["admin"] },
        {
          name: "ci",
          tokenSha256: createHash("sha256").update(TOKEN).digest("hex"),
          scopes: ["status:read"],
        },
      ],
      audit: { path: "-" },
    },
    { PATH: process.env.PATH, HOME: dir },
  );
});

after(async () => {
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function get(path: string, opts: { client?: string; token?: string; method?: string; body?: string } = {}) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(
      `${server.url}${path}`,
      {
        method: opts.method ?? "GET",
        ca: readFileSync(join(dir, "ca.crt")),
        ...(opts.client
          ? {
              cert: readFileSync(join(dir, `${opts.client}.crt`)),
              key: readFileSync(join(dir, `${opts.client}.key`)),
            }
          : {}),
        headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
      },
      (res) => {
        let body = "";
        res.on("data", (c: Buffer) => {
          body += c.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

test("a client certificate with a controller's CN authenticates; others fall back to tokens", async () => {
  assert.match(server.url, /^https:\/\//);
  const put = await get("/v1/machines/prod/m/config", { client: "ops", method: "PUT", body: "x" });
  assert.equal(put.status, 201, put.body);
  const token = JSON.parse(put.body).bootstrapToken as string;
  assert.equal((await get("/v1/machines/prod/m/status", { client: "ops" })).status, 200);
  // a certificate whose CN is no controller: no credential
  assert.equal((await get("/v1/machines/prod/m/status", { client: "stranger" })).status, 401);
  // no certificate at all: bearer tokens still work, for controllers and machines
  assert.equal((await get("/v1/machines/prod/m/status")).status, 401);
  assert.equal((await get("/v1/machines/prod/m/status", { token: TOKEN })).status, 200);
  assert.equal((await get("/v1/machines/prod/m/config", { token })).status, 200);
});
