/**
 * runChild: a child that ignores or refuses its stdin never crashes the test run, and one that
 * never ends is killed. stopChild: a stop with a bound.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { test } from "node:test";
import { runChild, stopChild } from "./child.ts";

const node = process.execPath;
const env = { PATH: process.env.PATH ?? "" };

test("a child that exits before reading its input: its status, no EPIPE", async () => {
  // 16 MiB is far more than a pipe buffers, so the write is still pending when the child exits.
  const input = new Uint8Array(16 * 1024 * 1024).fill(0x61);
  for (let i = 0; i < 5; i++) {
    const r = await runChild(node, ["-e", "process.stderr.write('bye'); process.exit(3)"], { env, input });
    assert.equal(r.status, 3);
    assert.equal(r.stderr, "bye");
  }
});

test("a child that closes its stdin at once, then prints: the whole output is collected", async () => {
  const script = "require('fs').closeSync(0); setTimeout(() => process.stdout.write('x'.repeat(200000)), 50)";
  const r = await runChild(node, ["-e", script], { env, input: new Uint8Array(8 * 1024 * 1024) });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.length, 200000);
});

test("the input reaches the child and its output comes back whole", async () => {
  const input = new TextEncoder().encode("hello\n".repeat(50000));
  const r = await runChild(node, ["-e", "process.stdin.pipe(process.stdout)"], { env, input });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(new Uint8Array(r.stdout), input);
});

test("a child killed by a signal: status null, the signal named", async () => {
  const r = await runChild(node, ["-e", "process.kill(process.pid, 'SIGKILL')"], { env });
  assert.equal(r.status, null);
  assert.match(r.stderr, /killed by SIGKILL/);
});

test("a program that does not exist rejects with ENOENT", async () => {
  await assert.rejects(runChild("/nonexistent/bootseal-no-such-program", [], { env }), { code: "ENOENT" });
});

test("a child that never ends is killed at its time limit: status null, SIGKILL named", async () => {
  const r = await runChild(node, ["-e", "setInterval(() => {}, 1000)"], { env, timeoutMs: 300 });
  assert.equal(r.status, null);
  assert.match(r.stderr, /killed by SIGKILL/);
});

test("stopChild: the exit code after SIGTERM; a child that ignores it is killed and the stop rejects", async () => {
  // Each child says "ready" once its SIGTERM handler is installed.
  const started = async (onTerm: string) => {
    const child = spawn(node, [
      "-e",
      `process.on('SIGTERM', ${onTerm}); setInterval(() => {}, 1000); console.log('ready')`,
    ]);
    await once(child.stdout, "data");
    return child;
  };
  assert.equal(await stopChild(await started("() => process.exit(7)")), 7);
  const stubborn = await started("() => {}");
  await assert.rejects(
    stopChild(stubborn, { graceMs: 300, output: () => "its output" }),
    /did not exit within 300 ms of SIGTERM: its output/,
  );
  assert.equal(stubborn.signalCode ?? (await once(stubborn, "exit"))[1], "SIGKILL");
});
