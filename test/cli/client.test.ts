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

const STATUS = {
  namespace: "default",
  name: "m1",
  phase: "failed",
  version: 2,
  updatedAt: "2026-12-02T04:40:19.123Z",
  published: true,
  config: { etag: '"e2"', sha256: "x", publishedAt: "2026-12-02T04:30:00.000Z", format: "binary" },
  history: [
    { phase: "published", at: "2026-12-02T04:30:00.000Z", by: "ci", version: 2 },
    {
      phase: "failed",
      at: "2026-12-02T04:40:19.123Z",
      by: "machine",
      version: 2,
      attempt: 1,
      exitCode: 3,
      message: "EXEC_FAILED: kubeadm\njoin\u001b[31m failed",
      output: "the command's output",
    },
  ],
};
const PAGE1 = {
  items: [
    {
      namespace: "default",
      name: "m1",
      phase: "failed",
      version: 2,
      updatedAt: "2026-12-02T04:40:19.123Z",
      published: true,
    },
  ],
  next: "default/m1",
};
const PAGE2 = {
  items: [
    {
      namespace: "prod",
      name: "w-0",
      phase: "succeeded",
      version: 1,
      updatedAt: "2026-12-02T04:41:00.000Z",
      published: false,
    },
  ],
};

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
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(STATUS));
      } else if (req.url?.startsWith("/v1/machines?")) {
        // Two pages: the table follows `next`, --json prints the first page as it came.
        const page = new URL(req.url, "http://x").searchParams.get("after") === null ? PAGE1 : PAGE2;
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(page));
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
  assert.equal(
    r.stdout,
    `published default/m1: version 1, etag "e"\nbootstrap token written to ${out} (expires t)\n`,
  );
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
  // Without --bootstrap-token-out the token is printed, as it always was.
  assert.equal(
    r.stdout,
    'published default/m1: version 1, etag "e"\nbootstrap token: machine-tok (expires t)\n',
  );
  const json = await run(
    ["publish", "--server", base, "--machine", "default/m1", "--json", doc],
    machineEnv({ BOOTSEAL_TOKEN: "t" }),
  );
  assert.equal(json.code, 0, json.stderr);
  assert.deepEqual(JSON.parse(json.stdout), {
    version: 1,
    etag: '"e"',
    sha256: "x",
    bootstrapToken: "machine-tok",
    tokenExpiresAt: "t",
  });
});

test("status --json: one machine, or the list with filters; errors map to exit codes", async () => {
  seen.length = 0;
  const one = await run(
    ["status", "--server", base, "--json", "default/m1"],
    machineEnv({ BOOTSEAL_TOKEN: "t" }),
  );
  assert.equal(one.code, 0, one.stderr);
  assert.deepEqual(JSON.parse(one.stdout), STATUS);
  const list = await run(
    ["status", "--server", base, "--json", "--namespace", "default", "--phase", "failed"],
    machineEnv(),
  );
  assert.equal(list.code, 0, list.stderr);
  assert.equal(seen[1]!.url, "/v1/machines?namespace=default&phase=failed");
  assert.deepEqual(JSON.parse(list.stdout), PAGE1, "the first page as the service sent it");
  const missing = await run(["status", "--server", base, "default/nope"], machineEnv());
  assert.equal(missing.code, EXIT_CODES.NOT_FOUND);
  const bad = await run(["status", "--server", base, "Default/x"], machineEnv());
  assert.equal(bad.code, EXIT_CODES.USAGE);
});

test("status: a human table of all pages, and one machine's history without command output", async () => {
  seen.length = 0;
  const list = await run(["status", "--server", base, "--namespace", "default"], machineEnv());
  assert.equal(list.code, 0, list.stderr);
  assert.deepEqual(
    seen.map((s) => s.url),
    [
      "/v1/machines?namespace=default&limit=1000",
      "/v1/machines?namespace=default&limit=1000&after=default%2Fm1",
    ],
  );
  assert.deepEqual(list.stdout.split("\n"), [
    "MACHINE     PHASE      VERSION  UPDATED               CONFIG",
    "default/m1  failed     2        2026-12-02T04:40:19Z  stored",
    "prod/w-0    succeeded  1        2026-12-02T04:41:00Z  deleted",
    "",
  ]);
  const one = await run(["status", "--server", base, "default/m1"], machineEnv());
  assert.equal(one.code, 0, one.stderr);
  const lines = one.stdout.split("\n");
  assert.deepEqual(lines.slice(0, 3), [
    "machine  default/m1",
    "phase    failed (version 2, updated 2026-12-02T04:40:19Z)",
    'config   etag "e2", binary, published 2026-12-02T04:30:00Z',
  ]);
  assert.match(lines[4]!, /^AT +PHASE +BY +VERSION +ATTEMPT +EXIT +MESSAGE$/);
  assert.match(lines[5]!, /^2026-12-02T04:30:00Z +published +ci +2$/);
  // The message's newline and terminal escape are flattened; the output stays out.
  assert.match(
    lines[6]!,
    /^2026-12-02T04:40:19Z +failed +machine +2 +1 +3 +EXEC_FAILED: kubeadm join \[31m failed$/,
  );
  assert.ok(!one.stdout.includes("the command's output"));
  assert.ok(!one.stdout.includes("\u001b"));
});

test("client errors: one line naming the request once, the code, the exit code; attempts with --verbose", async () => {
  // A port nothing listens on: every attempt is refused, --deadline bounds the retries.
  const dead = createServer();
  await new Promise<void>((r) => dead.listen(0, "127.0.0.1", r));
  const port = (dead.address() as AddressInfo).port;
  await new Promise((r) => dead.close(r));
  const url = `http://127.0.0.1:${port}`;
  const r = await run(["status", "--server", url, "--deadline", "1s"], machineEnv());
  assert.equal(r.code, EXIT_CODES.SERVICE_UNAVAILABLE);
  assert.equal(r.stdout, "");
  const lines = r.stderr.trimEnd().split("\n");
  assert.equal(lines.length, 1, r.stderr);
  assert.match(
    lines[0]!,
    new RegExp(
      `^bootseal: GET ${url}/v1/machines: no answer \\(ECONNREFUSED\\); gave up after \\d+ attempts in [\\d.]+s \\(SERVICE_UNAVAILABLE\\)$`,
    ),
  );
  assert.equal(lines[0]!.split(url).length, 2, "the URL once");

  const verbose = await run(["--verbose", "status", "--server", url, "--deadline", "1s"], machineEnv());
  assert.equal(verbose.code, EXIT_CODES.SERVICE_UNAVAILABLE);
  assert.match(verbose.stderr, /^\[bootseal\] INFO status: attempt 1 GET .*; retrying in /m);
  assert.equal(
    verbose.stderr
      .trimEnd()
      .split("\n")
      .filter((l) => l.startsWith("bootseal: ")).length,
    1,
  );

  const json = await run(["status", "--server", url, "--deadline", "500ms", "--json"], machineEnv());
  assert.equal(json.code, EXIT_CODES.SERVICE_UNAVAILABLE);
  assert.equal(json.stdout, "");
  const error = JSON.parse(json.stderr) as { error: { code: string; message: string; exit: number } };
  assert.equal(error.error.code, "SERVICE_UNAVAILABLE");
  assert.equal(error.error.exit, EXIT_CODES.SERVICE_UNAVAILABLE);
  assert.match(error.error.message, /^GET .*: no answer \(ECONNREFUSED\)/);

  const missing = await run(["status", "--server", base, "default/nope"], machineEnv());
  assert.equal(
    missing.stderr,
    `bootseal: GET ${base}/v1/machines/default/nope/status: HTTP 404: no (NOT_FOUND)\n`,
  );
  const badDeadline = await run(["status", "--server", base, "--deadline", "soon"], machineEnv());
  assert.equal(badDeadline.code, EXIT_CODES.USAGE);
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
