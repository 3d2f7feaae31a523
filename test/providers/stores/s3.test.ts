/**
 * S3-store quirks against the real peers: what each server answers when a write loses (all of it
 * becomes PRECONDITION_FAILED), credentials (SeaweedFS enforces them, moto does not), missing
 * buckets, prefixes, foreign objects, and an unreachable or silent endpoint failing fast.
 */
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { test } from "node:test";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  PutObjectCommand,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { openStore } from "../../../providers/stores/index.ts";
import type { ObjectStore } from "../../../providers/stores/object-store.ts";
import { S3ResponseError } from "../../../providers/stores/s3-object-calls.ts";
import { BootsealError } from "../../../src/errors.ts";
import { uniqueName } from "../../helpers/peers.ts";
import { moto, rawS3, type S3Peer, seaweedfs } from "../../helpers/s3.ts";
import { s3Bucket, s3BucketCleanup } from "./peer-buckets.ts";

const enc = (s: string) => new TextEncoder().encode(s);

function s3Store(peer: S3Peer, url: string, credentials = peer.credentials): ObjectStore {
  return openStore(url, { s3: { endpoint: peer.endpoint, credentials }, env: {} });
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

/** The server's own answer behind a mapped error: "412 PreconditionFailed". */
function answer(err: BootsealError): string {
  const cause = err.cause;
  assert.ok(cause instanceof S3ResponseError, "S3's answer is kept as the cause");
  return `${cause.status} ${cause.name}`;
}

const LOST_RACE: Record<string, { exists: string; staleIfMatch: string; ifMatchMissing: string }> = {
  // Observed on SeaweedFS 4.48 and moto 5.2.5.
  seaweedfs: {
    exists: "412 PreconditionFailed",
    staleIfMatch: "412 PreconditionFailed",
    ifMatchMissing: "412 PreconditionFailed",
  },
  moto: {
    exists: "412 PreconditionFailed",
    staleIfMatch: "412 PreconditionFailed",
    ifMatchMissing: "404 NoSuchKey",
  },
};

for (const peer of [seaweedfs(), moto()]) {
  test(`${peer.name}: every lost race is PRECONDITION_FAILED, whatever the server answered`, async () => {
    const bucket = await s3Bucket(peer);
    const store = s3Store(peer, `s3://${bucket}/p`);
    const v1 = await store.put("k", enc("v1"), { ifNoneMatch: "*" });
    await store.put("k", enc("v2"), { ifMatch: v1.etag });
    const expected = LOST_RACE[peer.name]!;
    const exists = await failure(store.put("k", enc("x"), { ifNoneMatch: "*" }));
    assert.equal(exists.code, "PRECONDITION_FAILED");
    assert.equal(answer(exists), expected.exists);
    const stale = await failure(store.put("k", enc("x"), { ifMatch: v1.etag }));
    assert.equal(stale.code, "PRECONDITION_FAILED");
    assert.equal(answer(stale), expected.staleIfMatch);
    const missing = await failure(store.put("absent", enc("x"), { ifMatch: v1.etag }));
    assert.equal(missing.code, "PRECONDITION_FAILED");
    assert.equal(answer(missing), expected.ifMatchMissing);
  });

  test(`${peer.name}: DeleteObject honours If-Match, so a conditional delete is atomic here`, async () => {
    const bucket = await s3Bucket(peer);
    const s3 = rawS3(peer);
    const put = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "k", Body: "x" }));
    await assert.rejects(
      s3.send(
        new DeleteObjectCommand({ Bucket: bucket, Key: "k", IfMatch: '"00000000000000000000000000000000"' }),
      ),
      (err) => err instanceof S3ServiceException && err.$metadata.httpStatusCode === 412,
    );
    const store = s3Store(peer, `s3://${bucket}`);
    assert.equal((await store.head("k"))?.etag, put.ETag, "the refused delete kept the object");
    assert.equal(await store.delete("k", { ifMatch: put.ETag! }), true);
    assert.equal(await store.head("k"), null);
    s3.destroy();
  });

  test(`${peer.name}: keys that need escaping name the same object for the store and for S3Client.send`, async () => {
    const bucket = await s3Bucket(peer);
    const s3 = rawS3(peer);
    const store = s3Store(peer, `s3://${bucket}/p`);
    try {
      for (const key of ["a b/c+d/e%f", "x?y#z&w=1", "(!'*)~", "ünï/日本", "a;b,c:d@e$=f"]) {
        const put = await store.put(key, enc(`v:${key}`), { ifNoneMatch: "*" });
        const viaSdk = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: `p/${key}` }));
        assert.equal(await viaSdk.Body?.transformToString(), `v:${key}`, key);
        assert.equal(viaSdk.ETag, put.etag, key);
        await s3.send(new PutObjectCommand({ Bucket: bucket, Key: `p/${key}`, Body: `w:${key}` }));
        const got = await store.get(key);
        assert.equal(new TextDecoder().decode(got?.body), `w:${key}`, key);
        assert.equal((await store.head(key))?.size, enc(`w:${key}`).byteLength, key);
        assert.equal(await store.delete(key, { ifMatch: got?.etag ?? "" }), true, key);
        assert.equal(await store.get(key), null, key);
      }
    } finally {
      s3.destroy();
    }
  });

  test(`${peer.name}: a missing bucket is NOT_FOUND for get and list, absent for head`, async () => {
    const store = s3Store(peer, `s3://${uniqueName("store-contract-missing")}`);
    const got = await failure(store.get("k"));
    assert.equal(got.code, "NOT_FOUND");
    assert.match(got.message, /bucket "store-contract-missing-.*" does not exist/);
    assert.equal(
      (
        await failure(
          (async () => {
            for await (const _ of store.list("")) break;
          })(),
        )
      ).code,
      "NOT_FOUND",
    );
    // A HEAD answer has no body: the server cannot say NoSuchBucket, only 404.
    assert.equal(await store.head("k"), null);
  });

  test(`${peer.name}: stores on different prefixes of one bucket do not see each other`, async () => {
    const bucket = await s3Bucket(peer);
    const a = s3Store(peer, `s3://${bucket}/tenant-a`);
    const b = s3Store(peer, `s3://${bucket}/tenant-a-b/`);
    await a.put("configs/ns/m", enc("a"), { ifNoneMatch: "*" });
    await b.put("configs/ns/m", enc("b"), { ifNoneMatch: "*" });
    const keys = async (s: ObjectStore) => {
      const out = [];
      for await (const o of s.list("")) out.push(o.key);
      return out;
    };
    assert.deepEqual(await keys(a), ["configs/ns/m"]);
    assert.deepEqual(await keys(b), ["configs/ns/m"]);
    const s3 = rawS3(peer);
    // Objects other tools put there that no valid key names are skipped by list.
    // (SeaweedFS turns "a//b" into "a/b", so only a folder marker is tested on every peer.)
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "tenant-a/folder/", Body: new Uint8Array(0) }));
    assert.deepEqual(await keys(a), ["configs/ns/m"]);
    s3.destroy();
  });
}

test("seaweedfs enforces credentials: a wrong key or secret is STORE_FORBIDDEN", async () => {
  const peer = seaweedfs();
  const bucket = await s3Bucket(peer);
  await s3Store(peer, `s3://${bucket}`).put("k", enc("x"), { unconditional: true });
  const badKey = s3Store(peer, `s3://${bucket}`, { accessKeyId: "nobody", secretAccessKey: "wrong-secret" });
  const e1 = await failure(badKey.get("k"));
  assert.equal(e1.code, "STORE_FORBIDDEN");
  assert.equal(answer(e1), "403 InvalidAccessKeyId");
  assert.ok(!e1.message.includes("wrong-secret") && !e1.message.includes("nobody"));
  assert.equal((await failure(badKey.head("k"))).code, "STORE_FORBIDDEN", "a 403 HEAD is not 'absent'");
  assert.equal((await failure(badKey.put("k", enc("y"), { unconditional: true }))).code, "STORE_FORBIDDEN");
  const badSecret = s3Store(peer, `s3://${bucket}`, { ...peer.credentials, secretAccessKey: "wrong-secret" });
  const e2 = await failure(badSecret.get("k"));
  assert.equal(e2.code, "STORE_FORBIDDEN");
  assert.equal(answer(e2), "403 SignatureDoesNotMatch");
});

test("moto does not check credentials (so it cannot test STORE_FORBIDDEN)", async () => {
  const peer = moto();
  const bucket = await s3Bucket(peer);
  await s3Store(peer, `s3://${bucket}`).put("k", enc("x"), { unconditional: true });
  const stranger = s3Store(peer, `s3://${bucket}`, { accessKeyId: "nobody", secretAccessKey: "wrong" });
  assert.equal(new TextDecoder().decode((await stranger.get("k"))!.body), "x");
});

test("moto refuses a put into a missing bucket (NOT_FOUND); seaweedfs creates the bucket", async () => {
  const missing = uniqueName("store-contract-missing");
  const onMoto = await failure(
    s3Store(moto(), `s3://${missing}`).put("k", enc("x"), { unconditional: true }),
  );
  assert.equal(onMoto.code, "NOT_FOUND");
  const peer = seaweedfs();
  s3BucketCleanup(peer, missing);
  const store = s3Store(peer, `s3://${missing}`);
  await store.put("k", enc("x"), { unconditional: true });
  assert.equal(new TextDecoder().decode((await store.get("k"))!.body), "x");
});

async function listen(onConnection: (socket: Socket) => void): Promise<{ server: Server; port: number }> {
  const server = createServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  assert.ok(address && typeof address === "object");
  return { server, port: address.port };
}

test("an unreachable S3 endpoint (closed port) is STORE_UNAVAILABLE within seconds", async () => {
  const { server, port } = await listen(() => {});
  await new Promise((resolve) => server.close(resolve)); // now nothing listens there
  const store = openStore("s3://bucket/p", {
    s3: { endpoint: `http://127.0.0.1:${port}`, credentials: { accessKeyId: "a", secretAccessKey: "b" } },
    env: {},
  });
  for (const call of [() => store.get("k"), () => store.put("k", enc("x"), { ifNoneMatch: "*" })]) {
    const started = Date.now();
    const err = await failure(call());
    assert.equal(err.code, "STORE_UNAVAILABLE", err.message);
    assert.ok(err.retryable);
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
  }
});

test("an S3 endpoint that accepts but never answers times out as STORE_UNAVAILABLE", async () => {
  const sockets: Socket[] = [];
  const { server, port } = await listen((socket) => sockets.push(socket));
  try {
    const store = openStore("s3://bucket/p", {
      s3: {
        endpoint: `http://127.0.0.1:${port}`,
        credentials: { accessKeyId: "a", secretAccessKey: "b" },
        requestTimeoutMs: 300,
        maxAttempts: 2,
      },
      env: {},
    });
    const started = Date.now();
    const err = await failure(store.head("k"));
    assert.equal(err.code, "STORE_UNAVAILABLE", err.message);
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
  } finally {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
});

/**
 * A pass-through HTTP proxy in front of SeaweedFS that records each request's method and
 * path; `ignoreIfMatchOnDelete` makes it a FAKE of a server that ignores If-Match on
 * DeleteObject, for the store's probe only (it answers that probe's conditional delete 204
 * itself, as such a server would after deleting). Headers are forwarded untouched, Host
 * included, so the client's SigV4 signature still verifies.
 */
async function recordingProxy(target: string, ignoreIfMatchOnDelete: boolean) {
  const { request, createServer: createHttpServer } = await import("node:http");
  const seen: string[] = [];
  const upstream = new URL(target);
  const server = createHttpServer((req, res) => {
    const path = req.url ?? "/";
    seen.push(`${req.method} ${decodeURIComponent(path.split("?")[0]!)}`);
    if (
      ignoreIfMatchOnDelete &&
      req.method === "DELETE" &&
      req.headers["if-match"] &&
      path.includes("probe")
    ) {
      req.resume();
      res.writeHead(204).end();
      return;
    }
    const out = request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on("error", () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  assert.ok(address && typeof address === "object");
  return { endpoint: `http://127.0.0.1:${address.port}`, seen, close: () => server.close() };
}

for (const ignores of [false, true]) {
  test(`seaweedfs${ignores ? " behind a FAKE that ignores If-Match on DeleteObject" : ""}: a conditional delete is ${ignores ? "checked with a HEAD first" : "one DeleteObject"} after a once-only probe`, async () => {
    const peer = seaweedfs();
    const bucket = await s3Bucket(peer);
    const proxy = await recordingProxy(peer.endpoint, ignores);
    try {
      const store = s3Store({ ...peer, endpoint: proxy.endpoint }, `s3://${bucket}/p`);
      const v1 = await store.put("k", enc("v1"), { ifNoneMatch: "*" });
      const v2 = await store.put("k", enc("v2"), { ifMatch: v1.etag });
      proxy.seen.splice(0);
      const stale = await failure(store.delete("k", { ifMatch: v1.etag }));
      assert.equal(stale.code, "PRECONDITION_FAILED");
      const probe = proxy.seen.filter((s) => s.includes(".bootseal-probe/") || s.startsWith("POST "));
      assert.deepEqual(
        probe.map((s) => s.split(" ")[0]),
        ignores ? ["PUT", "DELETE"] : ["PUT", "DELETE", "POST", "HEAD", "DELETE"],
        "the probe: put, a delete with a wrong If-Match, and (when refused) a DeleteObjects naming the wrong ETag, a HEAD that finds it kept, its clean-up",
      );
      proxy.seen.splice(0);
      assert.equal(await store.delete("k", { ifMatch: v2.etag }), true);
      assert.deepEqual(proxy.seen, [...(ignores ? [`HEAD /${bucket}/p/k`] : []), `DELETE /${bucket}/p/k`]);
      assert.equal(await store.head("k"), null);
      proxy.seen.splice(0);
      assert.equal(await store.delete("k", { ifMatch: v2.etag }), false, "gone: false, not an error");
      assert.ok(
        proxy.seen.every((s) => !s.includes("probe")),
        "probed once per store",
      );
    } finally {
      proxy.close();
    }
  });
}

for (const peerOf of [seaweedfs, moto]) {
  test(`${peerOf().name}: conditional deletes that arrive together ${peerOf().name === "seaweedfs" ? "go as one DeleteObjects (the server honours its ETags)" : "go one by one (the server ignores a DeleteObjects ETag)"}; stale ones are refused and kept, missing ones false`, async () => {
    const peer = peerOf();
    const batches = peer.name === "seaweedfs";
    const bucket = await s3Bucket(peer);
    const proxy = await recordingProxy(peer.endpoint, false);
    try {
      const store = s3Store({ ...peer, endpoint: proxy.endpoint }, `s3://${bucket}/p`);
      // The stale one's key needs escaping in DeleteObjects' XML, both ways.
      const keys = Array.from({ length: 12 }, (_, i) => (i === 10 ? "k10 a&b'(x)" : `k${i}`));
      const etags = await Promise.all(
        keys.map(async (k) => (await store.put(k, enc(k), { ifNoneMatch: "*" })).etag),
      );
      // k10 replaced since its etag was read; k11 deleted since.
      await store.put(keys[10]!, enc("newer"), { ifMatch: etags[10]! });
      await store.delete("k11");
      await store.delete("warm-up", { ifMatch: '"0"' }); // the probe, once per store
      proxy.seen.splice(0);
      const results = await Promise.allSettled(keys.map((k, i) => store.delete(k, { ifMatch: etags[i]! })));
      for (let i = 0; i < 10; i++)
        assert.deepEqual(results[i], { status: "fulfilled", value: true }, keys[i]);
      const stale = results[10];
      assert.ok(stale?.status === "rejected" && stale.reason instanceof BootsealError, String(stale));
      assert.equal(stale.reason.code, "PRECONDITION_FAILED");
      assert.deepEqual(results[11], { status: "fulfilled", value: false }, "a missing key: false");
      for (let i = 0; i < 10; i++) assert.equal(await store.head(keys[i]!), null, keys[i]);
      assert.equal(
        new TextDecoder().decode((await store.get(keys[10]!))?.body),
        "newer",
        "the stale delete kept it",
      );
      const posts = proxy.seen.filter((s) => s.startsWith("POST "));
      const deletes = proxy.seen.filter((s) => s.startsWith("DELETE "));
      if (batches) {
        // The first went alone while nothing else waited; the other eleven together; the refused
        // one again alone (its 412 and a HEAD tell "changed" from "gone").
        assert.deepEqual(posts, [`POST /${bucket}/`], proxy.seen.join("\n"));
        assert.deepEqual(
          deletes,
          [`DELETE /${bucket}/p/k0`, `DELETE /${bucket}/p/${keys[10]}`],
          proxy.seen.join("\n"),
        );
      } else {
        assert.deepEqual(posts, [], proxy.seen.join("\n"));
        assert.equal(deletes.length, 12, proxy.seen.join("\n"));
      }
    } finally {
      proxy.close();
    }
  });
}
