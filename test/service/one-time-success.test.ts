/**
 * One-time fetch `after-success`, the `succeeded` report (docs/api.md "Status durability"):
 * the config is deleted first, and the report's own status write records it gone, so the
 * report costs two store writes (the delete, the status) on a warm replica; the token stays,
 * bound to the deleted config, so it fetches nothing. What that order must keep: a failure anywhere on the way
 * answers 5xx with the report unwritten, and the machine's retry (it retries a 5xx) redoes
 * it and is recorded once; a machine whose token was replaced through another replica (this
 * one still holding the old records as its guesses) deletes nothing of the new publish.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { MemoryStore } from "../../providers/stores/memory.ts";
import type { ObjectStore } from "../../providers/stores/object-store.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { BootsealError } from "../../src/errors.ts";
import { buildApp } from "../../src/service/app.ts";
import { appConfig } from "./app-config.ts";
import { counting } from "./counting-store.ts";

const recipient = await identityToRecipient(await generateX25519Identity());
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

const apps: { close(): Promise<unknown> }[] = [];
after(async () => {
  for (const a of apps) await a.close();
});

function replica(store: ObjectStore) {
  const app = buildApp({
    logger: false,
    store,
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      trustProxy: false,
      oneTimeFetch: "after-success",
    }),
  });
  apps.push(app);
  return app;
}
type App = ReturnType<typeof replica>;

async function publish(app: App, name: string): Promise<string> {
  const res = await app.inject({
    method: "PUT",
    url: `/v1/machines/ns/${name}/config`,
    headers: { ...bearer(ADMIN), "content-type": "text/plain" },
    payload: `#cloud-config\n# ${name}\n`,
  });
  assert.ok(res.statusCode === 200 || res.statusCode === 201, res.body);
  return (res.json() as { bootstrapToken: string }).bootstrapToken;
}

const post = (app: App, name: string, token: string, phase: string) =>
  app.inject({
    method: "POST",
    url: `/v1/machines/ns/${name}/status`,
    headers: bearer(token),
    payload: { phase },
  });
const fetchConfig = (app: App, name: string, token: string) =>
  app.inject({ method: "GET", url: `/v1/machines/ns/${name}/config`, headers: bearer(token) });
const statusOf = async (app: App, name: string) => {
  const res = await app.inject({
    method: "GET",
    url: `/v1/machines/ns/${name}/status`,
    headers: bearer(ADMIN),
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json() as { phase: string; published: boolean; config: unknown; history: { phase: string }[] };
};

/** A store whose matching calls fail (STORE_UNAVAILABLE) while `failing` is true. */
function flaky(inner: ObjectStore, matches: (call: string) => boolean) {
  const state = { failing: false, failed: 0 };
  const gate = <T>(call: string, run: () => Promise<T>): Promise<T> => {
    if (state.failing && matches(call)) {
      state.failed++;
      return Promise.reject(new BootsealError("STORE_UNAVAILABLE", "injected store failure"));
    }
    return run();
  };
  const store: ObjectStore = {
    url: inner.url,
    get: (k, o) => gate(`get ${k}`, () => inner.get(k, o)),
    head: (k, o) => gate(`head ${k}`, () => inner.head(k, o)),
    put: (k, b, c, o) => gate(`put ${k}`, () => inner.put(k, b, c, o)),
    delete: (k, c, o) => gate(`delete ${k}`, () => inner.delete(k, c, o)),
    list: (p, o) => inner.list(p, o),
  };
  return { store, state };
}

test("succeeded: the config delete and one status write recording it (2 calls); the token fetches nothing after", async () => {
  const inner = new MemoryStore();
  const { store, calls } = counting(inner);
  const app = replica(store);
  const token = await publish(app, "m1");
  assert.equal((await fetchConfig(app, "m1", token)).statusCode, 200);
  assert.equal((await post(app, "m1", token, "running")).statusCode, 202);
  calls.splice(0);
  const res = await post(app, "m1", token, "succeeded");
  assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(calls.splice(0), ["delete configs/ns/m1", "put status/ns/m1.json"]);
  const status = await statusOf(app, "m1");
  assert.equal(status.phase, "succeeded");
  assert.equal(status.published, false);
  assert.equal(status.config, null);
  assert.deepEqual(
    status.history.map((e) => e.phase),
    ["published", "running", "succeeded"],
  );
  // The token only lets the machine finish: no fetch, no more reports, its DELETE is 204.
  assert.equal((await fetchConfig(app, "m1", token)).statusCode, 404);
  // Nor does it reach a config put at its machine's key later (a republish before its own
  // token is written): it is bound to the one it was issued for.
  const record = JSON.parse(Buffer.from((await inner.get("tokens/ns/m1.json"))?.body ?? []).toString());
  assert.ok(record.usesLeft > 0, "uses are left: the binding, not the count, refuses it");
  await inner.put("configs/ns/m1", Buffer.from("#cloud-config\n"), { unconditional: true });
  const later = await fetchConfig(app, "m1", token);
  assert.equal(later.statusCode, 401, later.body);
  assert.equal((await post(app, "m1", token, "succeeded")).statusCode, 401);
  const del = await app.inject({
    method: "DELETE",
    url: "/v1/machines/ns/m1/config",
    headers: bearer(token),
  });
  assert.equal(del.statusCode, 204, del.body);
});

for (const [what, matches] of [
  ["the config delete", (c: string) => c.startsWith("delete configs/")],
  ["the status write", (c: string) => c.startsWith("put status/")],
] as const) {
  test(`succeeded: ${what} fails: 5xx, the report unwritten; the machine's retry redoes it, recorded once`, async () => {
    const { store, state } = flaky(new MemoryStore(), matches);
    const app = replica(store);
    const token = await publish(app, "m2");
    assert.equal((await fetchConfig(app, "m2", token)).statusCode, 200);
    assert.equal((await post(app, "m2", token, "running")).statusCode, 202);
    state.failing = true;
    const failed = await post(app, "m2", token, "succeeded");
    assert.equal(failed.statusCode, 503, failed.body);
    assert.ok(state.failed > 0);
    const between = await statusOf(app, "m2");
    assert.notEqual(between.phase, "succeeded", "a failed report is not recorded");
    assert.ok(between.history.every((e) => e.phase !== "succeeded"));
    state.failing = false;
    const retried = await post(app, "m2", token, "succeeded");
    assert.equal(retried.statusCode, 200, retried.body);
    const status = await statusOf(app, "m2");
    assert.equal(status.phase, "succeeded");
    assert.equal(status.config, null);
    assert.equal(status.history.filter((e) => e.phase === "succeeded").length, 1);
    assert.ok(
      status.history.some((e) => e.phase === "running"),
      "the held report is kept for the retry",
    );
    assert.equal((await fetchConfig(app, "m2", token)).statusCode, 404, "the config is gone");
  });
}

test("succeeded with a token replaced through another replica: nothing of the new publish is deleted", async () => {
  const inner = new MemoryStore();
  const one = replica(inner);
  const two = replica(inner);
  const old = await publish(one, "m3");
  assert.equal((await fetchConfig(one, "m3", old)).statusCode, 200);
  assert.equal((await post(one, "m3", old, "running")).statusCode, 202);
  // A controller republishes through the other replica; `one` still holds the old records.
  const fresh = await publish(two, "m3");
  const res = await post(one, "m3", old, "succeeded");
  assert.equal(res.statusCode, 401, res.body);
  const status = await statusOf(two, "m3");
  assert.equal(status.published, true, "the new config is still published");
  assert.equal(status.phase, "published");
  const got = await fetchConfig(two, "m3", fresh);
  assert.equal(got.statusCode, 200, "the new token still fetches");
  const record = JSON.parse(Buffer.from((await inner.get("tokens/ns/m3.json"))?.body ?? []).toString());
  assert.equal(record.sha256, sha(fresh), "the new token record is left as the publish wrote it");
});
