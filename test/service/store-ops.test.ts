/**
 * Store operations per request (issue #11): what a publish, a fetch and a status post cost in
 * store calls, counted on the store the app is given (a counting wrapper over the memory
 * store), and the contracts the cheaper paths must keep: the status record's token mirror
 * follows every token change (publish, mint, delete), a replaced or deleted token cannot post
 * status or fetch, also when another replica replaced it and this one still has the old
 * records cached; the mirror never reaches a controller, and a status record written before
 * the mirror existed still authenticates through the token record.
 */
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync } from "node:crypto";
import { EventEmitter, once } from "node:events";
import { test } from "node:test";
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

function setup(inner: ObjectStore = new MemoryStore(), now?: () => Date) {
  const { store, calls } = counting(inner);
  const app = buildApp({
    logger: false,
    store,
    ...(now ? { now } : {}),
    config: appConfig({
      // Every report written before its answer: these tests count the writes of each one.
      statusReports: { coalesceMs: 0, maxHeldMachines: 1 },
      oneTimeFetch: "off", // the counts docs/api.md gives; after-success adds the delete on `succeeded`
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      trustProxy: false,
      fetcherArtifact: {
        url: "https://artifacts.example/bootseal",
        sha256: "a".repeat(64),
        signatureUrl: "https://artifacts.example/bootseal.sig",
        publicKeyPem: generateKeyPairSync("ed25519").publicKey.export({
          type: "spki",
          format: "pem",
        }) as string,
      },
    }),
  });
  const take = () => calls.splice(0);
  return { app, inner, take };
}

async function publish(
  app: ReturnType<typeof setup>["app"],
  name: string,
  headers: Record<string, string> = {},
) {
  const res = await app.inject({
    method: "PUT",
    url: `/v1/machines/ns/${name}/config`,
    headers: { ...bearer(ADMIN), "content-type": "application/octet-stream", ...headers },
    payload: "payload",
  });
  assert.ok(res.statusCode === 200 || res.statusCode === 201, res.body);
  return res.json() as { bootstrapToken: string; version: number };
}

const post = (app: ReturnType<typeof setup>["app"], name: string, token: string, phase: string) =>
  app.inject({
    method: "POST",
    url: `/v1/machines/ns/${name}/status`,
    headers: { ...bearer(token), "content-type": "application/json" },
    payload: { phase },
  });

test("a new machine's publish is three writes and no read; a republish writes over what this replica saw", async () => {
  const { app, take } = setup();
  await publish(app, "m1");
  assert.deepEqual(take(), ["put configs/ns/m1", "put status/ns/m1.json", "put tokens/ns/m1.json"]);
  await publish(app, "m1");
  assert.deepEqual(take(), [
    "put configs/ns/m1", // create-only: lost, the machine has a config
    "put configs/ns/m1",
    "put status/ns/m1.json", // conditional on the version this replica wrote
    "put tokens/ns/m1.json",
  ]);
  await app.close();
});

const PHASES = ["fetching", "decrypted", "written", "running", "succeeded"];

test("one replica: a fetch is a config read and a token write, a status post one write", async () => {
  const { app, take } = setup();
  const { bootstrapToken } = await publish(app, "m1");
  take();
  const fetched = await app.inject({
    method: "GET",
    url: "/v1/machines/ns/m1/config",
    headers: bearer(bootstrapToken),
  });
  assert.equal(fetched.statusCode, 200);
  assert.deepEqual(take(), ["get configs/ns/m1", "put tokens/ns/m1.json"]);
  for (const phase of PHASES) {
    const res = await post(app, "m1", bootstrapToken, phase);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(take(), ["put status/ns/m1.json"], phase);
  }
  const status = await app.inject({
    method: "GET",
    url: "/v1/machines/ns/m1/status",
    headers: bearer(ADMIN),
  });
  const body = status.json() as { phase: string; history: { phase: string }[] };
  assert.equal(body.phase, "succeeded");
  assert.deepEqual(
    body.history.map((e) => e.phase),
    ["published", "fetching", "decrypted", "written", "running", "succeeded"],
  );
  assert.ok(!("token" in body), "the token mirror is not shown to controllers");
  assert.ok(!status.body.includes(sha(bootstrapToken)), "nor is the token's digest anywhere in the answer");
  await app.close();
});

/** GET …/m1/config as the machine, with its bootstrap token. */
const fetchM1 = (app: ReturnType<typeof setup>["app"], token: string) =>
  app.inject({ method: "GET", url: "/v1/machines/ns/m1/config", headers: bearer(token) });

/** The stored token record's fetches left. */
async function usesLeft(store: ObjectStore, name: string): Promise<number> {
  const obj = await store.get(`tokens/ns/${name}.json`);
  assert.ok(obj, "a token record");
  return (JSON.parse(Buffer.from(obj.body).toString()) as { usesLeft: number }).usesLeft;
}

test("a fetch spends its use while it reads the config, and gives the use back when it has no document to send", async () => {
  const memory = new MemoryStore();
  const tokenWrites = new EventEmitter();
  let readsWaitForTokenWrite = false;
  let readsFail = false;
  const inner: ObjectStore = {
    url: memory.url,
    get: async (k, o) => {
      if (k.startsWith("configs/")) {
        if (readsFail) throw new BootsealError("STORE_UNAVAILABLE", "the store is down (test)");
        // Ends only once the token write has begun: a fetch that waited for the read before
        // spending would never get there (the bound is a failure's, not a measurement).
        if (readsWaitForTokenWrite) await once(tokenWrites, "put", { signal: AbortSignal.timeout(10_000) });
      }
      return memory.get(k, o);
    },
    head: (k, o) => memory.head(k, o),
    put: (k, b, c, o) => {
      if (k.startsWith("tokens/")) tokenWrites.emit("put");
      return memory.put(k, b, c, o);
    },
    delete: (k, c, o) => memory.delete(k, c, o),
    list: (p, o) => memory.list(p, o),
  };
  const { app, take } = setup(inner);

  const first = await publish(app, "m1");
  assert.equal(await usesLeft(memory, "m1"), 10);
  readsWaitForTokenWrite = true;
  take();
  const fetched = await fetchM1(app, first.bootstrapToken);
  assert.equal(fetched.statusCode, 200, fetched.body);
  assert.deepEqual(take(), ["get configs/ns/m1", "put tokens/ns/m1.json"], "still one read and one write");
  assert.equal(await usesLeft(memory, "m1"), 9);
  readsWaitForTokenWrite = false;

  // The config is gone (another replica deleted it): 404, and the use is back.
  await memory.delete("configs/ns/m1");
  const gone = await fetchM1(app, first.bootstrapToken);
  assert.equal(gone.statusCode, 404, gone.body);
  assert.equal(await usesLeft(memory, "m1"), 9);

  // The store fails the read: 503, nothing spent; once it is back, the fetch spends one.
  const second = await publish(app, "m1");
  readsFail = true;
  const failed = await fetchM1(app, second.bootstrapToken);
  assert.equal(failed.statusCode, 503, failed.body);
  assert.equal((failed.json() as { code: string }).code, "STORE_UNAVAILABLE");
  assert.equal(await usesLeft(memory, "m1"), 10);
  readsFail = false;
  assert.equal((await fetchM1(app, second.bootstrapToken)).statusCode, 200);
  assert.equal(await usesLeft(memory, "m1"), 9);
  // The replaced token spends nothing: its record is gone, and so is its use count.
  assert.equal((await fetchM1(app, first.bootstrapToken)).statusCode, 401);
  assert.equal(await usesLeft(memory, "m1"), 9);
  await app.close();
});

test("a token with one fetch left: of concurrent fetches exactly one gets the document, and a refused one spends nothing", async () => {
  const memory = new MemoryStore();
  const { app } = setup(memory);
  const { bootstrapToken } = await publish(app, "m1");
  for (let i = 0; i < 9; i++) {
    const res = await fetchM1(app, bootstrapToken);
    assert.equal(res.statusCode, 200, res.body);
  }
  assert.equal(await usesLeft(memory, "m1"), 1);
  const answers = await Promise.all(Array.from({ length: 6 }, () => fetchM1(app, bootstrapToken)));
  const codes = answers.map((r) => r.statusCode).sort();
  assert.deepEqual(codes, [200, 401, 401, 401, 401, 401], answers.map((r) => r.body).join("\n"));
  for (const r of answers.filter((a) => a.statusCode === 401)) {
    assert.equal((r.json() as { code: string }).code, "TOKEN_EXHAUSTED");
  }
  assert.equal(await usesLeft(memory, "m1"), 0);
  await app.close();
});

test("a controller's status read has an ETag that follows every write, and is 304 while it is current", async () => {
  const { app, take } = setup();
  const { bootstrapToken } = await publish(app, "m1");
  const read = (etag?: string) =>
    app.inject({
      method: "GET",
      url: "/v1/machines/ns/m1/status",
      headers: { ...bearer(ADMIN), ...(etag ? { "if-none-match": etag } : {}) },
    });
  const first = await read();
  assert.equal(first.statusCode, 200);
  const etag = String(first.headers.etag);
  assert.match(etag, /^"[^"]+"$/);
  take();
  const same = await read(etag);
  assert.equal(same.statusCode, 304);
  assert.equal(same.body, "");
  assert.equal(same.headers.etag, etag);
  assert.deepEqual(
    take(),
    ["get status/ns/m1.json"],
    "a 304 still reads the store: another replica may have written",
  );
  assert.equal((await read(`W/${etag}, "other"`)).statusCode, 304, "a list, and a weak form, match too");
  assert.equal((await post(app, "m1", bootstrapToken, "fetching")).statusCode, 200);
  const changed = await read(etag);
  assert.equal(changed.statusCode, 200, "a written report is a new version");
  assert.notEqual(changed.headers.etag, etag);
  assert.equal((changed.json() as { phase: string }).phase, "fetching");
  assert.equal((await read('"not-this-one"')).statusCode, 200);
  await app.close();
});

test("the mirror follows the token: a republish, a minted stub and a delete each lock the old token out of status posts", async () => {
  const { app } = setup();
  const first = (await publish(app, "m1")).bootstrapToken;
  const second = (await publish(app, "m1")).bootstrapToken;
  assert.equal((await post(app, "m1", first, "running")).statusCode, 401, "replaced by the republish");
  assert.equal((await post(app, "m1", second, "running")).statusCode, 200);

  const stub = await app.inject({
    method: "POST",
    url: "/v1/machines/ns/m1/userdata?format=cloud-init",
    headers: bearer(ADMIN),
  });
  assert.equal(stub.statusCode, 200, stub.body);
  const minted = /bst\.ns\.m1\.[A-Za-z0-9_-]{43}/.exec(stub.body)?.[0];
  assert.ok(minted, "the stub carries a token");
  assert.equal((await post(app, "m1", second, "running")).statusCode, 401, "replaced by the mint");
  assert.equal((await post(app, "m1", minted, "running")).statusCode, 200);

  const deleted = await app.inject({
    method: "DELETE",
    url: "/v1/machines/ns/m1/config",
    headers: bearer(ADMIN),
  });
  assert.equal(deleted.statusCode, 204);
  assert.equal((await post(app, "m1", minted, "running")).statusCode, 401, "deleted with the config");
  await app.close();
});

test("a replica without cached records: a fetch reads the token first, a status post reads the record first", async () => {
  const shared = new MemoryStore();
  const a = setup(shared);
  const b = setup(shared);
  const { bootstrapToken } = await publish(a.app, "m1");
  b.take();
  const fetched = await b.app.inject({
    method: "GET",
    url: "/v1/machines/ns/m1/config",
    headers: bearer(bootstrapToken),
  });
  assert.equal(fetched.statusCode, 200);
  assert.deepEqual(b.take(), ["get tokens/ns/m1.json", "get configs/ns/m1", "put tokens/ns/m1.json"]);
  assert.equal((await post(b.app, "m1", bootstrapToken, "fetching")).statusCode, 200);
  assert.deepEqual(b.take(), ["get status/ns/m1.json", "put status/ns/m1.json"]);
  await a.app.close();
  await b.app.close();
});

test("round robin over two replicas: stale guesses lose their race and re-read, nothing is lost", async () => {
  const shared = new MemoryStore();
  // One frozen instant: two boots' reports in one millisecond keep the order they were written in.
  const instant = new Date("2026-12-02T00:00:00Z");
  const replicas = [setup(shared, () => instant), setup(shared, () => instant)];
  const { bootstrapToken } = await publish(replicas[0]!.app, "m1");
  for (const [i, phase] of [...PHASES, ...PHASES].entries()) {
    const res = await post(replicas[i % 2]!.app, "m1", bootstrapToken, phase);
    assert.equal(res.statusCode, 200, res.body);
  }
  const stored = JSON.parse(Buffer.from((await shared.get("status/ns/m1.json"))!.body).toString());
  assert.deepEqual(
    stored.history.map((e: { phase: string }) => e.phase),
    ["published", ...PHASES, ...PHASES],
  );
  for (const r of replicas) await r.app.close();
});

test("a token replaced through another replica is refused here although this replica cached the old records", async () => {
  const shared = new MemoryStore();
  const a = setup(shared);
  const b = setup(shared);
  const old = (await publish(a.app, "m1")).bootstrapToken;
  // Replica a caches the token and status records of the old token.
  assert.equal(
    (await a.app.inject({ method: "GET", url: "/v1/machines/ns/m1/config", headers: bearer(old) }))
      .statusCode,
    200,
  );
  assert.equal((await post(a.app, "m1", old, "fetching")).statusCode, 200);
  const fresh = (await publish(b.app, "m1")).bootstrapToken;
  for (const res of [
    await post(a.app, "m1", old, "running"),
    await a.app.inject({ method: "GET", url: "/v1/machines/ns/m1/config", headers: bearer(old) }),
    await a.app.inject({
      method: "GET",
      url: "/v1/machines/ns/m1/config",
      headers: { ...bearer(old), "if-none-match": "*" },
    }),
  ]) {
    assert.equal(res.statusCode, 401, res.body);
  }
  // The new token works on the replica with the stale cache (its guess loses, it re-reads).
  assert.equal((await post(a.app, "m1", fresh, "running")).statusCode, 200);
  assert.equal(
    (await a.app.inject({ method: "GET", url: "/v1/machines/ns/m1/config", headers: bearer(fresh) }))
      .statusCode,
    200,
  );
  // And a delete through b locks the fresh token out of a.
  assert.equal(
    (await b.app.inject({ method: "DELETE", url: "/v1/machines/ns/m1/config", headers: bearer(ADMIN) }))
      .statusCode,
    204,
  );
  assert.equal((await post(a.app, "m1", fresh, "succeeded")).statusCode, 401);
  await a.app.close();
  await b.app.close();
});

test("a status record without a mirror (written before it existed) authenticates through the token record", async () => {
  const { app, inner } = setup();
  const { bootstrapToken } = await publish(app, "m1");
  const stored = await inner.get("status/ns/m1.json");
  assert.ok(stored);
  const { token: mirror, ...legacy } = JSON.parse(Buffer.from(stored.body).toString());
  assert.equal(mirror.sha256, sha(bootstrapToken), "the mirror holds the token's digest, not the token");
  assert.ok(!Buffer.from(stored.body).toString().includes(bootstrapToken));
  await inner.put("status/ns/m1.json", Buffer.from(JSON.stringify(legacy)), { unconditional: true });
  assert.equal((await post(app, "m1", bootstrapToken, "running")).statusCode, 200);
  assert.equal((await post(app, "m1", "bst.ns.m1.".padEnd(53, "x"), "running")).statusCode, 401);
  await app.close();
});

test("a status post that loses a race to another writer re-reads and keeps both entries", async () => {
  const { app, inner } = setup();
  const { bootstrapToken } = await publish(app, "m1");
  // Interleave: many posts at once on one machine, through one app (every one a conditional write).
  const phases = ["fetching", "decrypted", "written", "running", "succeeded", "running", "failed", "running"];
  const results = await Promise.all(phases.map((p) => post(app, "m1", bootstrapToken, p)));
  for (const r of results) assert.equal(r.statusCode, 200, r.body);
  const stored = await inner.get("status/ns/m1.json");
  const history = JSON.parse(Buffer.from(stored!.body).toString()).history as { phase: string }[];
  assert.equal(history.length, 1 + phases.length, "every 2xx'd post is in the history");
  assert.deepEqual(
    history
      .slice(1)
      .map((e) => e.phase)
      .sort(),
    [...phases].sort(),
  );
  await app.close();
});
