import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { stopChild } from "../helpers/child.ts";
import { whenReady } from "../helpers/until.ts";

const mainTs = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/**
 * Starts the real `bootseal serve` process and resolves once it prints its URL (the banner is
 * on stderr; `stdout()` is the JSON log stream so far).
 */
function serve(
  dataDir: string,
  logLevel = "warn",
): Promise<{ child: ChildProcess; url: string; banner: string; stdout: () => string }> {
  const child = spawn(
    process.execPath,
    [mainTs, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", logLevel],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stdout = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${out}`)), 20_000);
    child.stderr?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match && out.includes("controller token:")) {
        clearTimeout(timer);
        resolve({ child, url: match[1] as string, banner: out, stdout: () => stdout });
      }
    });
    child.once("exit", (code) => reject(new Error(`serve exited early (${code}): ${out}`)));
  });
}

function stop(child: ChildProcess): Promise<number | null> {
  return stopChild(child);
}

test("embedded default: health, readiness, 0600 key files, reuse on restart, clean SIGTERM", async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "bootseal-serve-"));
  dirs.push(dataDir);

  const first = await serve(dataDir);
  const health = await fetch(`${first.url}/healthz`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { status: "ok" });
  // Not ready until the fetcher executables are hashed and signed; then ready.
  const ready = await whenReady(first.url);
  assert.equal(ready.status, "ready");
  assert.equal(ready.checks.artifacts, "ok");
  const missing = await fetch(`${first.url}/v1/nothing`);
  assert.equal(missing.status, 404);
  assert.deepEqual(Object.keys((await missing.json()) as object).sort(), ["code", "message"]);

  const ageFile = join(dataDir, "keys", "age.txt");
  const tokenFile = join(dataDir, "keys", "controller-token");
  for (const file of [ageFile, tokenFile]) {
    assert.equal((await stat(file)).mode & 0o777, 0o600, `${file} must be 0600`);
  }
  const identity = await readFile(ageFile, "utf8");
  assert.match(identity, /^AGE-SECRET-KEY-1[0-9A-Z]+$/m);
  const recipient = /age recipient:\s+(age1[0-9a-z]+)/.exec(first.banner)?.[1];
  assert.ok(recipient, "banner names the age recipient");
  assert.ok(identity.includes(`# public key: ${recipient}`));
  const token = (await readFile(tokenFile, "utf8")).trim();
  assert.equal(Buffer.from(token, "base64url").length, 32);
  assert.ok(!first.banner.includes(token), "the token itself is never printed");
  assert.equal(await stop(first.child), 0);

  const second = await serve(dataDir);
  assert.ok(second.banner.includes(recipient), "a restart keeps the same identity");
  assert.equal((await readFile(tokenFile, "utf8")).trim(), token);
  assert.equal(await stop(second.child), 0);
});

test("standard output is the JSON log only (banner on stderr); access and audit lines share ISO-8601 times", async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "bootseal-serve-"));
  dirs.push(dataDir);
  const s = await serve(dataDir, "info");
  const denied = await fetch(`${s.url}/v1/machines`);
  assert.equal(denied.status, 401);
  await denied.arrayBuffer();
  assert.equal(await stop(s.child), 0);
  const lines = s.stdout().split("\n").filter(Boolean);
  assert.ok(lines.length > 0, "the access log is there");
  const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
  for (const line of lines) {
    const entry = JSON.parse(line) as { time?: unknown };
    assert.match(String(entry.time), iso, line);
  }
  assert.ok(!s.stdout().includes("listening on"), "no banner in the log stream");
  const access = lines
    .map((l) => JSON.parse(l) as { msg?: string; status?: number })
    .find((l) => l.msg === "request");
  assert.equal(access?.status, 401);
  const audit = (await readFile(join(dataDir, "audit.log"), "utf8")).split("\n").filter(Boolean);
  const auth = audit
    .map((l) => JSON.parse(l) as { action?: string; time?: unknown })
    .find((l) => l.action === "auth");
  assert.ok(auth, "the refused request is audited");
  assert.match(String(auth.time), iso);
});

test("a busy port: one line with the reason, LISTEN_FAILED's exit code, and no data directory", async () => {
  const root = await mkdtemp(join(tmpdir(), "bootseal-serve-"));
  dirs.push(root);
  const busy = createServer();
  await new Promise<void>((r) => busy.listen(0, "127.0.0.1", r));
  const port = (busy.address() as AddressInfo).port;
  const dataDir = join(root, "data");
  try {
    const r = await runServe(["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir]);
    assert.equal(r.code, EXIT_CODES.LISTEN_FAILED);
    assert.equal(
      r.stderr,
      `bootseal: cannot listen on 127.0.0.1:${port}: address already in use (EADDRINUSE)\n`,
    );
    assert.equal(r.stdout, "");
    await assert.rejects(stat(dataDir), { code: "ENOENT" }, "nothing was created");
  } finally {
    await new Promise((r) => busy.close(r));
  }
});

function runServe(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [mainTs, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr?.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
}
