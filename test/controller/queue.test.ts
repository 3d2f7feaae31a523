/** The work queue (src/controller/queue.ts): dedupe, one run per key at a time, backoff, concurrency. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { WorkQueue } from "../../src/controller/queue.ts";
import { until } from "../helpers/until.ts";

test("a key added while it waits runs once; added while it runs, it runs again after, never twice at once", async () => {
  const q = new WorkQueue({ concurrency: 4, backoff: { baseMs: 1, capMs: 1 } });
  const runs: string[] = [];
  let active = 0;
  let maxActive = 0;
  let release: (() => void) | undefined;
  q.add("a/x");
  q.add("a/x");
  q.start(async (key) => {
    active++;
    maxActive = Math.max(maxActive, active);
    runs.push(key);
    if (runs.length === 1) await new Promise<void>((r) => (release = r));
    active--;
  });
  await until("the first run", () => release !== undefined);
  q.add("a/x");
  q.add("a/x");
  assert.equal(runs.length, 1, "not while it runs");
  release?.();
  await until("the second run", () => runs.length === 2);
  await q.stop();
  assert.deepEqual(runs, ["a/x", "a/x"]);
  assert.equal(maxActive, 1);
});

test("concurrency: at most N keys at once", async () => {
  const q = new WorkQueue({ concurrency: 2, backoff: { baseMs: 1, capMs: 1 } });
  let active = 0;
  let maxActive = 0;
  let done = 0;
  const gates: (() => void)[] = [];
  q.start(async () => {
    active++;
    maxActive = Math.max(maxActive, active);
    await new Promise<void>((r) => gates.push(r));
    active--;
    done++;
  });
  for (let i = 0; i < 5; i++) q.add(`ns/k${i}`);
  await until("two running", () => gates.length === 2);
  assert.equal(active, 2);
  while (done < 5) {
    gates.shift()?.();
    await new Promise((r) => setImmediate(r));
  }
  await q.stop();
  assert.equal(maxActive, 2);
});

test("addRateLimited: the ceiling doubles per failure up to the cap, honours Retry-After, forget resets", () => {
  const q = new WorkQueue({ concurrency: 1, backoff: { baseMs: 100, capMs: 1000 }, random: () => 0.999999 });
  const delays = [1, 2, 3, 4, 5].map(() => q.addRateLimited("ns/a"));
  assert.deepEqual(delays, [99, 199, 399, 799, 999]);
  assert.equal(q.failures("ns/a"), 5);
  assert.equal(q.addRateLimited("ns/a", 5000), 5000, "Retry-After wins when longer");
  q.forget("ns/a");
  assert.equal(q.failures("ns/a"), 0);
  assert.equal(q.addRateLimited("ns/a"), 99);
  return q.stop();
});

test("addAfter: the key comes back after the delay; the earlier of two delays wins", async () => {
  const q = new WorkQueue({ concurrency: 1, backoff: { baseMs: 1, capMs: 1 } });
  const runs: string[] = [];
  q.start(async (key) => {
    runs.push(key);
  });
  q.addAfter("ns/b", 60_000);
  q.addAfter("ns/b", 20);
  await until("the delayed key", () => runs.length === 1);
  assert.deepEqual(runs, ["ns/b"]);
  await q.stop();
});
