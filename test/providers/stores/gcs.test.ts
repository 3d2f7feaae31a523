/**
 * GCS-store quirks against fake-gcs-server: the etag is the quoted generation, the fake ignores
 * ifGenerationMatch on DELETE (the store checks the generation itself), missing buckets,
 * prefixes, and an unreachable or silent endpoint failing fast.
 */
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { test } from "node:test";
import { ApiError, Storage } from "@google-cloud/storage";
import { openStore } from "../../../providers/stores/index.ts";
import type { ObjectStore } from "../../../providers/stores/object-store.ts";
import { BootsealError } from "../../../src/errors.ts";
import { peer, uniqueName } from "../../helpers/peers.ts";
import { gcsBucket } from "./peer-buckets.ts";

const enc = (s: string) => new TextEncoder().encode(s);

function gsStore(url: string, apiEndpoint = peer("GCS_ENDPOINT"), extra = {}): ObjectStore {
  return openStore(url, { gcs: { apiEndpoint, projectId: "test", ...extra }, env: {} });
}

async function failure(p: Promise<unknown>): Promise<BootsealError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof BootsealError, `expected a BootsealError, got ${String(err)}`);
    return err;
  }
  assert.fail("expected a failure");
}

test("fake-gcs-server: the etag is the object's generation, and a lost race (412) is PRECONDITION_FAILED", async () => {
  const { bucket, apiEndpoint } = await gcsBucket();
  const store = gsStore(`gs://${bucket}/p`, apiEndpoint);
  const put = await store.put("configs/ns/m", enc("v1"), { ifNoneMatch: "*" });
  const raw = new Storage({ apiEndpoint, projectId: "test" });
  const [md] = await raw.bucket(bucket).file("p/configs/ns/m").getMetadata();
  assert.equal(put.etag, `"${md.generation}"`);
  const lost = await failure(store.put("configs/ns/m", enc("v2"), { ifNoneMatch: "*" }));
  assert.equal(lost.code, "PRECONDITION_FAILED");
  assert.ok(lost.cause instanceof ApiError && lost.cause.code === 412, "fake-gcs-server answers 412");
  const next = await store.put("configs/ns/m", enc("v2"), { ifMatch: put.etag });
  const stale = await failure(store.put("configs/ns/m", enc("v3"), { ifMatch: put.etag }));
  assert.ok(stale.cause instanceof ApiError && stale.cause.code === 412);
  assert.equal((await store.get("configs/ns/m"))?.etag, next.etag);
});

test("fake-gcs-server ignores ifGenerationMatch on DELETE; the store refuses a stale delete itself", async () => {
  const { bucket, apiEndpoint } = await gcsBucket();
  const raw = new Storage({ apiEndpoint, projectId: "test" }).bucket(bucket);
  await raw.file("victim").save("x", { resumable: false });
  await raw.file("victim").delete({ ifGenerationMatch: 1 }); // real GCS would answer 412 here
  assert.equal((await raw.file("victim").exists())[0], false, "the fake deleted it anyway");
  const store = gsStore(`gs://${bucket}`, apiEndpoint);
  const v1 = await store.put("k", enc("v1"), { unconditional: true });
  const v2 = await store.put("k", enc("v2"), { unconditional: true });
  assert.equal((await failure(store.delete("k", { ifMatch: v1.etag }))).code, "PRECONDITION_FAILED");
  assert.equal(
    (await failure(store.delete("k", { ifMatch: '"not-a-generation"' }))).code,
    "PRECONDITION_FAILED",
  );
  assert.equal(await store.delete("k", { ifMatch: v2.etag }), true);
});

test("fake-gcs-server: a missing bucket is NOT_FOUND for put and list, absent for get", async () => {
  const store = gsStore(`gs://${uniqueName("store-contract-missing")}`);
  const put = await failure(store.put("k", enc("x"), { unconditional: true }));
  assert.equal(put.code, "NOT_FOUND");
  assert.match(put.message, /bucket "store-contract-missing-.*" does not exist/);
  const list = await failure(
    (async () => {
      for await (const _ of store.list("")) break;
    })(),
  );
  assert.equal(list.code, "NOT_FOUND");
  // fake-gcs-server answers a plain 404 for both a missing object and a missing bucket.
  assert.equal(await store.get("k"), null);
});

test("fake-gcs-server: stores on different prefixes of one bucket do not see each other", async () => {
  const { bucket, apiEndpoint } = await gcsBucket();
  const a = gsStore(`gs://${bucket}/tenant-a`, apiEndpoint);
  const b = gsStore(`gs://${bucket}/tenant-a-b`, apiEndpoint);
  await a.put("configs/ns/m", enc("a"), { ifNoneMatch: "*" });
  await b.put("configs/ns/m", enc("b"), { ifNoneMatch: "*" });
  // A "folder" placeholder some consoles create is no valid key: list skips it.
  await new Storage({ apiEndpoint, projectId: "test" })
    .bucket(bucket)
    .file("tenant-a/folder/")
    .save("", { resumable: false, validation: false });
  for (const [store, body] of [
    [a, "a"],
    [b, "b"],
  ] as const) {
    const keys = [];
    for await (const o of store.list("")) keys.push(o.key);
    assert.deepEqual(keys, ["configs/ns/m"]);
    assert.equal(new TextDecoder().decode((await store.get("configs/ns/m"))!.body), body);
  }
});

async function listen(onConnection: (socket: Socket) => void): Promise<{ server: Server; port: number }> {
  const server = createServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  assert.ok(address && typeof address === "object");
  return { server, port: address.port };
}

test("an unreachable GCS endpoint (closed port) is STORE_UNAVAILABLE within seconds", async () => {
  const { server, port } = await listen(() => {});
  await new Promise((resolve) => server.close(resolve));
  const store = gsStore("gs://bucket/p", `http://127.0.0.1:${port}`);
  for (const call of [() => store.get("k"), () => store.put("k", enc("x"), { ifNoneMatch: "*" })]) {
    const started = Date.now();
    const err = await failure(call());
    assert.equal(err.code, "STORE_UNAVAILABLE", err.message);
    assert.ok(err.retryable);
    assert.ok(Date.now() - started < 8000, `took ${Date.now() - started} ms`);
  }
});

test("a GCS endpoint that accepts but never answers times out as STORE_UNAVAILABLE", async () => {
  const sockets: Socket[] = [];
  const { server, port } = await listen((socket) => sockets.push(socket));
  try {
    const store = gsStore("gs://bucket/p", `http://127.0.0.1:${port}`, { timeoutMs: 300, maxRetries: 0 });
    const started = Date.now();
    const err = await failure(store.head("k"));
    assert.equal(err.code, "STORE_UNAVAILABLE", err.message);
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
  } finally {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
});
