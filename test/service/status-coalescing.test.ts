/**
 * Coalesced status reports (src/service/status-coalescer.ts, docs/api.md "Status durability"):
 * intermediate phases are answered 202 and held, terminal ones are written with what is held
 * before their 200; held reports are written when the window ends or the app closes; a report
 * held under a token that is replaced meanwhile is dropped, never written; the bounds write
 * through; reports held on one replica and written after another replica's terminal one join
 * the history in time order without changing the current phase, also when every report
 * shares one millisecond.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { mergeHistory } from "../../src/service/status-history.ts";
import type { StatusEntry } from "../../src/service/status-record.ts";
import { until } from "../helpers/until.ts";
import { appConfig } from "./app-config.ts";
import { counting } from "./counting-store.ts";

const recipient = await identityToRecipient(await generateX25519Identity());
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const INTERMEDIATE = ["fetching", "decrypted", "written", "running"];

/** A clock one second further at every reading: every report has its own instant. */
function tickingClock(): () => Date {
  let t = Date.parse("2026-12-02T00:00:00Z");
  return () => {
    t += 1000;
    return new Date(t);
  };
}

/**
 * A clock that never moves: every report shares one millisecond, as two reports through two
 * replicas on loopback can. A held report then goes by the boot's order of phases.
 */
function frozenClock(): () => Date {
  const t = Date.parse("2026-12-02T00:00:00Z");
  return () => new Date(t);
}

const CLOCKS = [
  ["each report its own instant", tickingClock],
  ["every report in one millisecond", frozenClock],
] as const;

interface SetupOptions {
  readonly inner?: MemoryStore;
  readonly coalesceMs?: number;
  readonly maxHeldMachines?: number;
  readonly now?: () => Date;
  readonly oneTimeFetch?: "off" | "after-success";
}

function setup(opts: SetupOptions = {}) {
  const inner = opts.inner ?? new MemoryStore();
  const { store, calls } = counting(inner);
  const app = buildApp({
    logger: false,
    store,
    ...(opts.now ? { now: opts.now } : {}),
    config: appConfig({
      statusReports: { coalesceMs: opts.coalesceMs ?? 60_000, maxHeldMachines: opts.maxHeldMachines ?? 1000 },
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      trustProxy: false,
      oneTimeFetch: opts.oneTimeFetch ?? "off",
    }),
  });
  return { app, inner, take: () => calls.splice(0) };
}

type App = ReturnType<typeof setup>["app"];

async function publish(app: App, name: string): Promise<string> {
  const res = await app.inject({
    method: "PUT",
    url: `/v1/machines/ns/${name}/config`,
    headers: { ...bearer(ADMIN), "content-type": "application/octet-stream" },
    payload: "payload",
  });
  assert.ok(res.statusCode === 200 || res.statusCode === 201, res.body);
  return (res.json() as { bootstrapToken: string }).bootstrapToken;
}

const post = (app: App, name: string, token: string, phase: string) =>
  app.inject({
    method: "POST",
    url: `/v1/machines/ns/${name}/status`,
    headers: { ...bearer(token), "content-type": "application/json" },
    payload: { phase, message: `${name} ${phase}` },
  });

async function stored(
  inner: MemoryStore,
  name: string,
): Promise<{ phase: string; history: { phase: string }[] }> {
  const obj = await inner.get(`status/ns/${name}.json`);
  assert.ok(obj, `status/ns/${name}.json exists`);
  return JSON.parse(Buffer.from(obj.body).toString());
}

const phasesOf = async (inner: MemoryStore, name: string) =>
  (await stored(inner, name)).history.map((e) => e.phase);

test("a boot: four intermediate reports answered 202 and held, the terminal one writes all five; 3 store calls", async () => {
  const { app, inner, take } = setup();
  const token = await publish(app, "m1");
  take();
  const fetched = await app.inject({
    method: "GET",
    url: "/v1/machines/ns/m1/config",
    headers: bearer(token),
  });
  assert.equal(fetched.statusCode, 200);
  for (const phase of INTERMEDIATE) {
    const res = await post(app, "m1", token, phase);
    assert.equal(res.statusCode, 202, res.body);
    assert.equal(res.json<{ phase: string }>().phase, phase);
  }
  assert.deepEqual(await phasesOf(inner, "m1"), ["published"], "nothing written before the terminal report");
  const done = await post(app, "m1", token, "succeeded");
  assert.equal(done.statusCode, 200, done.body);
  assert.deepEqual(take(), ["get configs/ns/m1", "put tokens/ns/m1.json", "put status/ns/m1.json"]);
  const record = await stored(inner, "m1");
  assert.equal(record.phase, "succeeded");
  assert.deepEqual(
    record.history.map((e) => e.phase),
    ["published", ...INTERMEDIATE, "succeeded"],
  );
  await app.close();
});

test("held reports are written when the window ends, without a terminal report", async () => {
  const { app, inner } = setup({ coalesceMs: 30 });
  const token = await publish(app, "m1");
  assert.equal((await post(app, "m1", token, "fetching")).statusCode, 202);
  assert.equal((await post(app, "m1", token, "running")).statusCode, 202);
  await until("the window's write", async () => (await phasesOf(inner, "m1")).length === 3);
  const record = await stored(inner, "m1");
  assert.equal(record.phase, "running");
  assert.deepEqual(
    record.history.map((e) => e.phase),
    ["published", "fetching", "running"],
  );
  await app.close();
});

test("closing the app writes what is held", async () => {
  const { app, inner } = setup();
  const token = await publish(app, "m1");
  assert.equal((await post(app, "m1", token, "written")).statusCode, 202);
  await app.close();
  assert.deepEqual(await phasesOf(inner, "m1"), ["published", "written"]);
});

test("a report held under a token replaced meanwhile is dropped, never written", async () => {
  const { app, inner } = setup();
  const old = await publish(app, "m1");
  assert.equal((await post(app, "m1", old, "running")).statusCode, 202);
  const fresh = await publish(app, "m1"); // a republish: the old token is out
  assert.equal((await post(app, "m1", old, "succeeded")).statusCode, 401, "the old token cannot write");
  // The new token's first report sends the old token's held ones to the store: refused there.
  assert.equal((await post(app, "m1", fresh, "fetching")).statusCode, 202);
  await until("the dropped report", async () => (await droppedReports(app)) === 1);
  await app.close();
  assert.deepEqual(await phasesOf(inner, "m1"), ["published", "published", "fetching"]);
});

/** bootseal_status_reports_dropped_total, from the app's /metrics. */
async function droppedReports(app: App): Promise<number> {
  const text = (await app.inject({ method: "GET", url: "/metrics" })).body;
  const m = /^bootseal_status_reports_dropped_total (\d+)/m.exec(text);
  assert.ok(m, "the metric is exposed");
  return Number(m[1]);
}

test("bounds: past maxHeldMachines a report is written through (200)", async () => {
  const { app, inner } = setup({ maxHeldMachines: 1 });
  const a = await publish(app, "a");
  const b = await publish(app, "b");
  assert.equal((await post(app, "a", a, "running")).statusCode, 202);
  assert.equal((await post(app, "b", b, "running")).statusCode, 200, "the second machine is not held");
  assert.deepEqual(await phasesOf(inner, "b"), ["published", "running"]);
  for (let i = 0; i < 15; i++) assert.equal((await post(app, "a", a, "running")).statusCode, 202);
  assert.equal(
    (await post(app, "a", a, "running")).statusCode,
    200,
    "17th report of one machine: written through",
  );
  assert.equal((await phasesOf(inner, "a")).length, 1 + 17, "with the 16 held before it");
  await app.close();
});

for (const [clockName, clock] of CLOCKS) {
  test(`two replicas, ${clockName}: reports held by one reach the store after the other's terminal one, in time order`, async () => {
    const inner = new MemoryStore();
    const now = clock();
    const one = setup({ inner, now });
    const two = setup({ inner, now });
    const token = await publish(one.app, "m1");
    const replicas = [one.app, two.app, one.app, two.app];
    for (const [i, phase] of INTERMEDIATE.entries()) {
      assert.equal((await post(replicas[i] as App, "m1", token, phase)).statusCode, 202, phase);
    }
    assert.equal((await post(one.app, "m1", token, "succeeded")).statusCode, 200);
    assert.deepEqual(await phasesOf(inner, "m1"), ["published", "fetching", "written", "succeeded"]);
    await two.app.close(); // writes decrypted and running, older than succeeded
    const record = await stored(inner, "m1");
    assert.equal(record.phase, "succeeded", "the late reports do not change the current phase");
    assert.deepEqual(
      record.history.map((e) => e.phase),
      ["published", ...INTERMEDIATE, "succeeded"],
    );
    await one.app.close();
  });
}

test("coalesce 0: every report written before its 200", async () => {
  const { app, inner } = setup({ coalesceMs: 0 });
  const token = await publish(app, "m1");
  for (const phase of INTERMEDIATE) assert.equal((await post(app, "m1", token, phase)).statusCode, 200);
  assert.deepEqual(await phasesOf(inner, "m1"), ["published", ...INTERMEDIATE]);
  await app.close();
});

for (const [clockName, clock] of CLOCKS) {
  test(`one-time after success through another replica, ${clockName}: reports held before the delete still join the history`, async () => {
    const inner = new MemoryStore();
    const now = clock();
    const one = setup({ inner, now, oneTimeFetch: "after-success" });
    const two = setup({ inner, now, oneTimeFetch: "after-success" });
    const token = await publish(one.app, "m1");
    assert.equal((await post(two.app, "m1", token, "running")).statusCode, 202);
    assert.equal((await post(one.app, "m1", token, "succeeded")).statusCode, 200);
    assert.equal(await inner.get("configs/ns/m1"), null, "the one-time config is gone");
    await two.app.close();
    const record = await stored(inner, "m1");
    assert.deepEqual(
      record.history.map((e) => e.phase),
      ["published", "running", "succeeded"],
    );
    assert.equal(record.phase, "succeeded");
    // A report made after the delete is refused as before.
    const late = setup({ inner, now, oneTimeFetch: "after-success" });
    assert.equal((await post(late.app, "m1", token, "running")).statusCode, 401);
    await late.app.close();
    await one.app.close();
  });
}

test("mergeHistory within one millisecond: held reports go in a boot's order, written-through ones in arrival order", () => {
  const at = "2026-12-02T00:00:00.000Z";
  const e = (phase: StatusEntry["phase"], when = at): StatusEntry => ({
    phase,
    at: when,
    by: "machine",
    version: 1,
  });
  const phases = (h: readonly StatusEntry[]) => h.map((x) => x.phase);
  const stored = [e("published", "2026-12-01T23:59:59.000Z"), e("written"), e("succeeded")];
  // Held by a replica and written late: before the succeeded another replica wrote.
  assert.deepEqual(phases(mergeHistory(stored, [e("decrypted"), e("running")], 2)), [
    "published",
    "decrypted",
    "written",
    "running",
    "succeeded",
  ]);
  // Written through (a new boot's first report, stamped in its last one's millisecond): after.
  assert.deepEqual(phases(mergeHistory(stored, [e("fetching")])), [
    "published",
    "written",
    "succeeded",
    "fetching",
  ]);
  // A held batch with the report at hand: only the held ones move; an earlier instant always wins.
  assert.deepEqual(
    phases(mergeHistory(stored, [e("running"), e("fetching", "2026-12-02T00:00:00.001Z")], 1)),
    ["published", "written", "running", "succeeded", "fetching"],
  );
  assert.deepEqual(phases(mergeHistory(stored, [e("failed", "2026-12-01T23:59:59.500Z")])), [
    "published",
    "failed",
    "written",
    "succeeded",
  ]);
});
