import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, test } from "node:test";
import { OUTPUT_TAIL_BYTES, runCommand, TailBuffer } from "../../src/fetcher/exec.ts";
import { createReporter, statusBody, truncateUtf8 } from "../../src/fetcher/report.ts";

function sink() {
  const s = new PassThrough();
  let text = "";
  s.on("data", (c: Buffer) => {
    text += c.toString();
  });
  return { stream: s, text: () => text };
}

test("tail buffer keeps the last bytes", () => {
  const t = new TailBuffer(10);
  t.push(Buffer.from("0123456789"));
  t.push(Buffer.from("abc"));
  assert.equal(t.text(), "3456789abc");
  t.push(Buffer.from("x".repeat(25)));
  assert.equal(t.text(), "x".repeat(10));
});

test("exec: output streamed through, exit code and the last 16 KiB kept", async () => {
  const out = sink();
  const err = sink();
  const result = await runCommand(
    `i=0; while [ $i -lt 3000 ]; do echo "line $i"; i=$((i+1)); done; echo oops >&2; exit 3`,
    { env: { PATH: process.env.PATH }, stdout: out.stream, stderr: err.stream },
  );
  assert.equal(result.exitCode, 3);
  assert.equal(result.signal, null);
  assert.match(out.text(), /^line 0\n/);
  assert.match(out.text(), /line 2999\n$/);
  assert.equal(err.text(), "oops\n");
  assert.ok(Buffer.byteLength(result.outputTail) <= OUTPUT_TAIL_BYTES);
  assert.ok(Buffer.byteLength(result.outputTail) > OUTPUT_TAIL_BYTES - 20);
  assert.match(result.outputTail, /line 2999\noops\n$/);
  assert.ok(!result.outputTail.includes("line 0\n"));
});

test("exec: the command runs with cloud-init's umask 022 while the fetcher's own is the unit's 0077", async () => {
  const out = sink();
  const dir = mkdtempSync(join(tmpdir(), "umask-"));
  const previous = process.umask(0o077);
  try {
    const result = await runCommand("umask; mkdir d; : > f", {
      env: { PATH: process.env.PATH },
      stdout: out.stream,
      stderr: out.stream,
      cwd: dir,
    });
    assert.equal(result.exitCode, 0, out.text());
    assert.equal(out.text().trim(), "0022");
    assert.equal(process.umask(), 0o077, "the fetcher's own umask is put back");
    assert.equal(statSync(join(dir, "f")).mode & 0o777, 0o644);
    assert.equal(statSync(join(dir, "d")).mode & 0o777, 0o755);
  } finally {
    process.umask(previous);
    rmSync(dir, { recursive: true, force: true });
  }
});

test("exec: a timeout kills the whole process group", async () => {
  const out = sink();
  const t0 = Date.now();
  const result = await runCommand("sleep 30 & sleep 30; echo never", {
    env: { PATH: process.env.PATH },
    stdout: out.stream,
    stderr: out.stream,
    timeoutMs: 200,
  });
  assert.ok(Date.now() - t0 < 5000);
  assert.equal(result.timedOut, true);
  assert.equal(result.exitCode, null);
  assert.equal(result.signal, "SIGTERM");
});

test("UTF-8 truncation keeps whole characters", () => {
  assert.equal(truncateUtf8("héllo", 2), "h");
  assert.equal(truncateUtf8("héllo", 3), "hé");
  assert.equal(truncateUtf8("héllo", 4, true), "llo");
  assert.equal(truncateUtf8("€€", 4, true), "€");
  assert.equal(truncateUtf8("abc", 10), "abc");
  const body = statusBody({
    phase: "failed",
    code: "MAC_MISMATCH",
    message: "m".repeat(10_000),
    output: "é".repeat(20_000),
  });
  assert.equal(Buffer.byteLength(body.message as string), 4096);
  assert.ok(Buffer.byteLength(body.output as string) <= 16 * 1024);
  assert.match(body.message as string, /^MAC_MISMATCH: m/);
  assert.deepEqual(Object.keys(body).sort(), ["message", "output", "phase"]);
});

let server: Server;
let url: URL;
const got: Array<{ body: unknown; auth: string | undefined }> = [];
let failFirst = 0;
let hang = false;

before(async () => {
  server = createServer((req, res) => {
    let data = "";
    req.on("data", (c) => {
      data += c;
    });
    req.on("end", () => {
      if (hang) return;
      if (failFirst > 0) {
        failFirst--;
        res
          .writeHead(503, { "content-type": "application/json" })
          .end('{"code":"STORE_UNAVAILABLE","message":"x"}');
        return;
      }
      got.push({ body: JSON.parse(data), auth: req.headers.authorization });
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/machines/default/m1/status`);
});
after(() => {
  server.closeAllConnections();
  server.close();
});

test("reports: in order, retried on 5xx, with the bearer token", async () => {
  got.length = 0;
  failFirst = 2;
  hang = false;
  const lines: string[] = [];
  const r = createReporter({ url, token: "tok", log: (l) => lines.push(l), baseBackoffMs: 5 });
  r.report({ phase: "fetching" });
  r.report({ phase: "decrypted", attempt: 2 });
  r.report({ phase: "failed", code: "EXEC_FAILED", message: "exited 1", exitCode: 1, output: "tail" });
  await r.flush(5000);
  assert.deepEqual(
    got.map((g) => g.body),
    [
      { phase: "fetching" },
      { phase: "decrypted", attempt: 2 },
      { phase: "failed", message: "EXEC_FAILED: exited 1", exitCode: 1, output: "tail" },
    ],
  );
  assert.ok(got.every((g) => g.auth === "Bearer tok"));
  assert.equal(r.delivered.length, 3);
  assert.ok(!lines.join("\n").includes("tok\n"));
});

test("reports never block: report() returns at once, flush() gives up at its bound", async () => {
  hang = true;
  const lines: string[] = [];
  const r = createReporter({ url, log: (l) => lines.push(l), attemptTimeoutMs: 10_000 });
  const t0 = Date.now();
  r.report({ phase: "fetching" });
  // Far below the 10 s attempt it would wait for, with room for a loaded machine's GC pause.
  assert.ok(Date.now() - t0 < 1000, "report() does not wait");
  await r.flush(300);
  assert.ok(Date.now() - t0 < 2000, "flush is bounded");
  assert.equal(r.delivered.length, 0);
  assert.match(lines.join("\n"), /abandoned/);
  hang = false;
});

test("reports to nowhere still log the phase", async () => {
  const lines: string[] = [];
  const r = createReporter({ url: null, log: (l) => lines.push(l) });
  r.report({ phase: "written", message: "2 file(s)" });
  await r.flush(100);
  assert.deepEqual(lines, ["phase written: 2 file(s)"]);
});
