/**
 * One-time fetch (issue #10 M3, M4). M3: `after-first-fetch` under concurrency, two replicas
 * (two apps, each with its own store client) over one store, on the file store and on
 * SeaweedFS: of two concurrent fetches with a machine's token exactly one gets the config,
 * the other 409 ALREADY_FETCHED, and the loser's audit line says a second fetch was
 * attempted. M4: `after-success` and `bootseal fetch --one-time`'s DELETE: 204, never a 401,
 * nothing counted as a failed authentication.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, test } from "node:test";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { openStore } from "../../providers/stores/index.ts";
import { MemoryStore } from "../../providers/stores/memory.ts";
import type { ObjectStore } from "../../providers/stores/object-store.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { BootsealError } from "../../src/errors.ts";
import { type AppConfig, buildApp } from "../../src/service/app.ts";
import { auditLoggerTo } from "../../src/service/plugins/audit.ts";
import { uniqueName } from "../helpers/peers.ts";
import { rawS3, removeS3Bucket, seaweedfs } from "../helpers/s3.ts";
import { appConfig } from "./app-config.ts";

const recipient = await identityToRecipient(await generateX25519Identity());
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const MACHINES = 20;

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

function replica(store: ObjectStore, extra: Partial<AppConfig>) {
  const audit = new PassThrough();
  const lines: Record<string, unknown>[] = [];
  audit.on("data", (c: Buffer) => {
    for (const l of c.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(l));
  });
  const app = buildApp({
    logger: false,
    store,
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      trustProxy: false,
      ...extra,
    }),
    audit: auditLoggerTo(audit),
  });
  cleanups.push(() => app.close());
  return { app, audit: lines };
}

async function publish(app: ReturnType<typeof replica>["app"], machine: string): Promise<string> {
  const res = await app.inject({
    method: "PUT",
    url: `/v1/machines/${machine}/config`,
    headers: { ...bearer(ADMIN), "content-type": "text/plain" },
    payload: `#cloud-config\n# ${machine}\n`,
  });
  assert.equal(res.statusCode, 201, res.body);
  return (res.json() as { bootstrapToken: string }).bootstrapToken;
}

async function raceTwoFetches(open: () => ObjectStore) {
  const one = replica(open(), { oneTimeFetch: "after-first-fetch" });
  const two = replica(open(), { oneTimeFetch: "after-first-fetch" });
  const tokens = new Map<string, string>();
  for (let i = 0; i < MACHINES; i++) tokens.set(`prod/m-${i}`, await publish(one.app, `prod/m-${i}`));
  const results = await Promise.all(
    [...tokens].map(async ([machine, token]) => {
      const get = (r: typeof one) =>
        r.app.inject({ method: "GET", url: `/v1/machines/${machine}/config`, headers: bearer(token) });
      const answers = await Promise.all([get(one), get(two)]);
      return { machine, answers };
    }),
  );
  for (const { machine, answers } of results) {
    const statuses = answers.map((a) => a.statusCode).sort();
    assert.deepEqual(statuses, [200, 409], `${machine}: exactly one fetch gets the config`);
    const loser = answers.find((a) => a.statusCode === 409);
    assert.deepEqual(Object.keys(loser?.json() ?? {}).sort(), ["code", "message"]);
    assert.equal(loser?.json().code, "ALREADY_FETCHED");
    assert.ok(!loser?.body.includes("cloud-config"), "the loser gets no part of the config");
    // A third fetch later, the config long gone: still the specific answer, not a 404.
    const later = await one.app.inject({
      method: "GET",
      url: `/v1/machines/${machine}/config`,
      headers: bearer(tokens.get(machine) as string),
    });
    assert.equal(later.statusCode, 409);
    assert.equal(later.json().code, "ALREADY_FETCHED");
  }
  const lines = [...one.audit, ...two.audit].filter((l) => l.action === "fetch");
  for (const machine of tokens.keys()) {
    const mine = lines.filter((l) => l.machine === machine);
    assert.equal(mine.filter((l) => l.outcome === "ok").length, 1, `${machine}: one ok fetch audited`);
    const second = mine.filter((l) => l.outcome === "second-fetch");
    assert.equal(second.length, 2, `${machine}: the loser and the later fetch are audited as second fetches`);
    for (const l of second) {
      assert.equal(l.code, "ALREADY_FETCHED");
      assert.equal(l.status, 409);
      assert.equal(l.who, `machine:${machine}`);
    }
  }
  // The config is deleted once claimed: a controller finds nothing.
  const gone = await one.app.inject({
    method: "GET",
    url: "/v1/machines/prod/m-0/config",
    headers: bearer(ADMIN),
  });
  assert.equal(gone.statusCode, 404);
}

test("after-first-fetch, file store, two replicas: 20 machines x 2 concurrent fetches, one 200 each", async () => {
  const dir = await mkdtemp(join(tmpdir(), "bootseal-one-time-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  await raceTwoFetches(() => openStore(`file://${dir}`, { env: {} }));
});

test("after-first-fetch, SeaweedFS, two replicas: 20 machines x 2 concurrent fetches, one 200 each", async () => {
  const peer = seaweedfs();
  const Bucket = uniqueName("bootseal-one-time");
  const s3 = rawS3(peer);
  await s3.send(new CreateBucketCommand({ Bucket }));
  s3.destroy();
  cleanups.push(async () => {
    await removeS3Bucket(peer, Bucket);
  });
  await raceTwoFetches(() =>
    openStore(`s3://${Bucket}/one-time`, {
      s3: { endpoint: peer.endpoint, credentials: peer.credentials },
      env: {},
    }),
  );
});

test("after-first-fetch: a store failure deleting the claimed config still delivers it, once", async () => {
  const memory = new MemoryStore();
  let failDeletes = true;
  const store: ObjectStore = {
    url: memory.url,
    get: (k, o) => memory.get(k, o),
    head: (k, o) => memory.head(k, o),
    put: (k, b, c, o) => memory.put(k, b, c, o),
    delete: async (k, c, o) => {
      if (failDeletes && k.startsWith("configs/")) throw new BootsealError("STORE_UNAVAILABLE", "down");
      return memory.delete(k, c, o);
    },
    list: (p, o) => memory.list(p, o),
  };
  const { app } = replica(store, { oneTimeFetch: "after-first-fetch" });
  const token = await publish(app, "prod/flaky");
  const url = "/v1/machines/prod/flaky/config";
  const first = await app.inject({ method: "GET", url, headers: bearer(token) });
  assert.equal(first.statusCode, 200, first.body);
  failDeletes = false;
  const second = await app.inject({ method: "GET", url, headers: bearer(token) });
  assert.equal(second.statusCode, 409);
  assert.equal(second.json().code, "ALREADY_FETCHED");
});

test("after-success + fetch --one-time: the machine's DELETE is 204, never 401, nothing counted", async () => {
  // A small limit, one address: before, every machine's DELETE was a 401 and counted, so the
  // fleet behind one address was refused after a handful.
  const { app, audit } = replica(new MemoryStore(), {
    oneTimeFetch: "after-success",
    rateLimit: { authFailuresPerMinute: 2 },
  });
  for (let i = 0; i < 10; i++) {
    const machine = `prod/s-${i}`;
    const token = await publish(app, machine);
    const url = `/v1/machines/${machine}/config`;
    assert.equal((await app.inject({ method: "GET", url, headers: bearer(token) })).statusCode, 200);
    const ok = await app.inject({
      method: "POST",
      url: `/v1/machines/${machine}/status`,
      headers: bearer(token),
      payload: { phase: "succeeded" },
    });
    assert.equal(ok.statusCode, 200, ok.body);
    // The service deleted the config when it took `succeeded`; the fetcher's DELETE follows.
    const del = await app.inject({ method: "DELETE", url, headers: bearer(token) });
    assert.equal(del.statusCode, 204, `${machine}: ${del.body}`);
    assert.equal((await app.inject({ method: "GET", url, headers: bearer(ADMIN) })).statusCode, 404);
  }
  assert.deepEqual(
    audit.filter((l) => l.outcome === "denied"),
    [],
    "no authentication failure anywhere in the sequence",
  );
  // Nothing was counted: one failure under the limit is still a plain 401.
  const wrong = await app.inject({ method: "GET", url: "/v1/machines", headers: bearer("wrong") });
  assert.equal(wrong.statusCode, 401);
});

test("after-success: before `succeeded` the machine may not delete; a controller's DELETE of a gone config is 404", async () => {
  const { app } = replica(new MemoryStore(), { oneTimeFetch: "after-success" });
  const token = await publish(app, "prod/early");
  const url = "/v1/machines/prod/early/config";
  const early = await app.inject({ method: "DELETE", url, headers: bearer(token) });
  assert.equal(early.statusCode, 403);
  assert.equal((await app.inject({ method: "DELETE", url, headers: bearer(ADMIN) })).statusCode, 204);
  assert.equal((await app.inject({ method: "DELETE", url, headers: bearer(ADMIN) })).statusCode, 404);
});
