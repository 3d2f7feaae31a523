import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";

const mainTs = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** Starts the real `bootseal serve` process and resolves once it prints its URL. */
function serve(dataDir: string): Promise<{ child: ChildProcess; url: string; banner: string }> {
  const child = spawn(
    process.execPath,
    [mainTs, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "warn"],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${out}`)), 20_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match && out.includes("controller token:")) {
        clearTimeout(timer);
        resolve({ child, url: match[1] as string, banner: out });
      }
    });
    child.once("exit", (code) => reject(new Error(`serve exited early (${code}): ${out}`)));
  });
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.once("exit", (code) => resolve(code));
    child.kill("SIGTERM");
  });
}

test("embedded default: health, readiness, 0600 key files, reuse on restart, clean SIGTERM", async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "bootseal-serve-"));
  dirs.push(dataDir);

  const first = await serve(dataDir);
  const health = await fetch(`${first.url}/healthz`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { status: "ok" });
  const ready = await fetch(`${first.url}/readyz`);
  assert.equal(ready.status, 200);
  assert.equal(((await ready.json()) as { status: string }).status, "ready");
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
