/**
 * Machines per phase (src/service/phase-counts.ts) over a real machine store on the memory
 * store: a count is one listing plus reads of the records that changed since the last count;
 * at most one count per refresh interval, shared by concurrent scrapes; the last complete
 * count is served while a new one runs and when one fails; deleted records leave the count;
 * two replicas' counters over one store agree.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MemoryStore } from "../../providers/stores/memory.ts";
import type { ObjectStore } from "../../providers/stores/object-store.ts";
import { BootsealError } from "../../src/errors.ts";
import type { Phase } from "../../src/machine/status-protocol.ts";
import { statusKey } from "../../src/machine/store-layout.ts";
import { machineStore } from "../../src/service/machine-store.ts";
import { PhaseCounter } from "../../src/service/phase-counts.ts";
import { RecordCache } from "../../src/service/record-cache.ts";
import { until } from "../helpers/until.ts";
import { counting } from "./counting-store.ts";

const record = (name: string, phase: Phase) =>
  Buffer.from(
    JSON.stringify({
      namespace: "ns",
      name,
      phase,
      version: 1,
      updatedAt: "2026-12-02T00:00:00.000Z",
      config: null,
      history: [],
    }),
  );

async function put(store: ObjectStore, name: string, phase: Phase): Promise<void> {
  await store.put(statusKey({ namespace: "ns", name }), record(name, phase), { unconditional: true });
}

function setup(refreshMs = 30_000) {
  const inner = new MemoryStore();
  const { store, calls } = counting(inner);
  let clock = 0;
  let fail = false;
  const failures: unknown[] = [];
  const machines = machineStore(store);
  const source = {
    statusVersions: (options?: { signal?: AbortSignal }) => {
      if (fail) throw new BootsealError("STORE_UNAVAILABLE", "down");
      return machines.statusVersions(options);
    },
    readPhase: machines.readPhase,
  };
  const counter = new PhaseCounter({
    source,
    refreshMs,
    waitMs: 60_000, // these tests wait for every count
    now: () => clock,
    failed: (err) => failures.push(err),
  });
  return {
    inner,
    counter,
    take: () => calls.splice(0),
    tick: (ms: number) => {
      clock += ms;
    },
    failNext: (on: boolean) => {
      fail = on;
    },
    failures,
  };
}

const counts = async (c: PhaseCounter) => (await c.current())?.counts;

test("a count lists once and reads only the records that changed since the last one", async () => {
  const s = setup(0);
  for (let i = 0; i < 10; i++) await put(s.inner, `m${i}`, i < 3 ? "failed" : "succeeded");
  await put(s.inner, "p", "published");
  const first = await counts(s.counter);
  assert.equal(first?.failed, 3);
  assert.equal(first?.succeeded, 7);
  assert.equal(first?.published, 1);
  assert.equal(first?.running, 0);
  const ops = s.take();
  assert.equal(ops.filter((o) => o.startsWith("list")).length, 1);
  assert.equal(ops.filter((o) => o.startsWith("get")).length, 11);
  // One record changes, one goes, one comes: one listing, two reads.
  await put(s.inner, "p", "running");
  await s.inner.delete(statusKey({ namespace: "ns", name: "m0" }));
  await put(s.inner, "new", "fetching");
  const second = await counts(s.counter);
  assert.deepEqual(
    {
      failed: second?.failed,
      running: second?.running,
      fetching: second?.fetching,
      published: second?.published,
    },
    { failed: 2, running: 1, fetching: 1, published: 0 },
  );
  assert.deepEqual(s.take().sort(), ["get status/ns/new.json", "get status/ns/p.json", "list status/"]);
});

test("at most one count per refresh interval; concurrent scrapes share one count", async () => {
  const s = setup(30_000);
  await put(s.inner, "a", "running");
  const [x, y] = await Promise.all([s.counter.current(), s.counter.current()]);
  assert.equal(x, y);
  assert.equal(s.take().filter((o) => o.startsWith("list")).length, 1);
  await put(s.inner, "b", "running");
  s.tick(29_999);
  assert.equal((await counts(s.counter))?.running, 1, "within the interval: the last count");
  assert.deepEqual(s.take(), []);
  s.tick(1);
  assert.equal((await counts(s.counter))?.running, 2);
});

test("a failed count keeps the last one and is reported; the next interval counts again", async () => {
  const s = setup(1000);
  await put(s.inner, "a", "succeeded");
  const first = await s.counter.current();
  s.failNext(true);
  s.tick(1000);
  assert.equal(await s.counter.current(), first);
  assert.equal(s.failures.length, 1);
  s.failNext(false);
  assert.equal(await s.counter.current(), first, "no new count before the interval");
  s.tick(1000);
  await put(s.inner, "b", "succeeded");
  assert.equal((await counts(s.counter))?.succeeded, 2);
});

test("a scrape waits for a slow count at most waitMs and gets the last count meanwhile", async () => {
  const inner = new MemoryStore();
  await put(inner, "a", "written");
  const machines = machineStore(inner);
  let release: () => void = () => {};
  let gate = new Promise<void>((r) => (release = r));
  let clock = 0;
  const counter = new PhaseCounter({
    source: {
      async *statusVersions(options) {
        await gate;
        yield* machines.statusVersions(options);
      },
      readPhase: machines.readPhase,
    },
    refreshMs: 10,
    waitMs: 0,
    now: () => clock,
  });
  assert.equal(await counter.current(), undefined, "no complete count yet: nothing to serve");
  release();
  await until("the first count", async () => (await counter.current()) !== undefined, { everyMs: 10 });
  const first = await counter.current();
  assert.equal(first?.counts.written, 1);
  gate = new Promise<void>((r) => (release = r));
  await put(inner, "b", "written");
  clock += 10;
  assert.equal(await counter.current(), first, "a count is running: the last one is served");
  release();
  await until("the second count", async () => (await counter.current()) !== first, { everyMs: 10 });
  assert.equal((await counter.current())?.counts.written, 2);
  counter.close();
});

test("two replicas' counters over one store report the same counts", async () => {
  const inner = new MemoryStore();
  const [a, b] = [machineStore(inner), machineStore(inner)].map(
    (m) => new PhaseCounter({ source: m, refreshMs: 0, waitMs: 60_000 }),
  );
  await put(inner, "x", "running");
  await put(inner, "y", "failed");
  assert.deepEqual(await counts(a!), await counts(b!));
  await put(inner, "x", "succeeded");
  const [ca, cb] = [await counts(a!), await counts(b!)];
  assert.deepEqual(ca, cb);
  assert.equal(ca?.succeeded, 1);
  assert.equal(ca?.running, 0);
});

test("a record at the version this replica's cache holds is counted without a read; one changed elsewhere is read", async () => {
  const inner = new MemoryStore();
  const { store, calls } = counting(inner);
  const machines = machineStore(store, new RecordCache());
  const counter = new PhaseCounter({ source: machines, refreshMs: 0, waitMs: 60_000 });
  for (const name of ["a", "b", "c"]) await put(inner, name, "running");
  // This replica has seen a and b (as it does every record of the machines it serves).
  await machines.readStatus({ namespace: "ns", name: "a" });
  await machines.readStatus({ namespace: "ns", name: "b" });
  calls.splice(0);
  assert.equal((await counts(counter))?.running, 3);
  assert.deepEqual(calls.splice(0).sort(), ["get status/ns/c.json", "list status/"]);
  // Another replica moves a on: the listing's version is not the cached one, so a is read.
  await put(inner, "a", "succeeded");
  const after = await counts(counter);
  assert.deepEqual([after?.running, after?.succeeded], [2, 1]);
  assert.deepEqual(calls.splice(0).sort(), ["get status/ns/a.json", "list status/"]);
});
