/** publish / status / userdata against a recording HTTP server: routes, headers, token handling. */
import assert from "node:assert/strict";
import { readFile, stat, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { machineEnv, run, tempDir } from "../fetcher/helpers.ts";

let server: Server;
let base: string;
let dir: { path: string; remove: () => Promise<void> };
const seen: Array<{ method: string; url: string; headers: IncomingMessage["headers"]; body: string }> = [];
let fail503 = 0;

before(async () => {
  dir = await tempDir("client");
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      if (fail503 > 0) {
        fail503--;
        res.writeHead(503, { "retry-after": "0" }).end('{"code":"STORE_UNAVAILABLE","message":"down"}');
        return;
      }
      if (req.method === "PUT") {
        res.writeHead(201, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            version: 1,
            etag: '"e"',
            sha256: "x",
            bootstrapToken: "machine-tok",
            tokenExpiresAt: "t",
          }),
        );
      } else if (req.url?.includes("/userdata")) {
        res.writeHead(200, { "content-type": "text/cloud-config" }).end("#cloud-config\n# token inside\n");
      } else if (req.url?.startsWith("/v1/machines/default/m1/status")) {
        res.writeHead(200, { "content-type": "application/json" }).end('{"phase":"succeeded","history":[]}');
      } else if (req.url?.startsWith("/v1/machines?")) {
        res.writeHead(200, { "content-type": "application/json" }).end('{"machines":[]}');
      } else {
        res.writeHead(404, { "content-type": "application/json" }).end('{"code":"NOT_FOUND","message":"no"}');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  server.close();
  await dir.remove();
});

test("publish: PUT with the controller token, plaintext as octet-stream, token written 0600", async () => {
  const payload = join(dir.path, "payload");
  await writeFile(payload, "#cloud-config\n");
  const out = join(dir.path, "machine.token");
  seen.length = 0;
  fail503 = 1;
  const r = await run(
    [
      "publish",
      "--server",
      base,
      "--machine",
      "default/m1",
      "--if-none-match",
      "--bootstrap-token-out",
      out,
      payload,
    ],
    machineEnv({ BOOTSEAL_TOKEN: "ctl-secret" }),
  );
  assert.equal(r.code, 0, r.stderr);
  assert.equal(seen.length, 2, "the 503 was retried");
  const put = seen[1]!;
  assert.equal(put.method, "PUT");
  assert.equal(put.url, "/v1/machines/default/m1/config");
  assert.equal(put.headers.authorization, "Bearer ctl-secret");
  assert.equal(put.headers["content-type"], "application/octet-stream");
  assert.equal(put.headers["if-none-match"], "*");
  assert.equal(put.body, "#cloud-config\n");
  assert.equal((await readFile(out, "utf8")).trim(), "machine-tok");
  assert.equal((await stat(out)).mode & 0o777, 0o600);
  assert.ok(!r.stdout.includes("machine-tok"));
  assert.ok(!(r.stdout + r.stderr).includes("ctl-secret"));
});

test("publish: a SOPS document goes as application/sops+json", async () => {
  const doc = join(dir.path, "doc.json");
  await writeFile(doc, JSON.stringify({ data: "ENC[...]", sops: { mac: "ENC[...]", version: "3.13.2" } }));
  seen.length = 0;
  const r = await run(
    ["publish", "--server", base, "--machine", "default/m1", doc],
    machineEnv({ BOOTSEAL_TOKEN: "t" }),
  );
  assert.equal(r.code, 0, r.stderr);
  assert.equal(seen[0]!.headers["content-type"], "application/sops+json");
});

test("status: one machine, or the list with filters; errors map to exit codes", async () => {
  seen.length = 0;
  const one = await run(["status", "--server", base, "default/m1"], machineEnv({ BOOTSEAL_TOKEN: "t" }));
  assert.equal(one.code, 0, one.stderr);
  assert.equal(JSON.parse(one.stdout).phase, "succeeded");
  const list = await run(
    ["status", "--server", base, "--namespace", "default", "--phase", "failed"],
    machineEnv(),
  );
  assert.equal(list.code, 0, list.stderr);
  assert.equal(seen[1]!.url, "/v1/machines?namespace=default&phase=failed");
  const missing = await run(["status", "--server", base, "default/nope"], machineEnv());
  assert.equal(missing.code, EXIT_CODES.NOT_FOUND);
  const bad = await run(["status", "--server", base, "Default/x"], machineEnv());
  assert.equal(bad.code, EXIT_CODES.USAGE);
});

test("userdata: GET with the format; --output is 0600", async () => {
  const out = join(dir.path, "user-data");
  seen.length = 0;
  const r = await run(
    ["userdata", "--server", base, "--machine", "default/m1", "--format", "ignition", "--output", out],
    machineEnv({ BOOTSEAL_TOKEN: "t" }),
  );
  assert.equal(r.code, 0, r.stderr);
  assert.equal(seen[0]!.url, "/v1/machines/default/m1/userdata?format=ignition");
  assert.equal((await stat(out)).mode & 0o777, 0o600);
  const bad = await run(
    ["userdata", "--server", base, "--machine", "default/m1", "--format", "xml"],
    machineEnv(),
  );
  assert.equal(bad.code, EXIT_CODES.USAGE);
});
