/**
 * The S3 smoke test shared by every S3 peer: put/get, and conditional puts (If-None-Match: *
 * and If-Match) including a real race, asserting what this server answers when a write loses.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { uniqueName } from "../helpers/peers.ts";

/** What a server answers on a failed precondition: HTTP status and SDK error name. */
export interface S3Refusal {
  status: number;
  name: string;
}

export interface S3SmokeOptions {
  server: string;
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** The answer to a conditional put that lost (If-None-Match: * on an existing key, stale If-Match). */
  lostRace: S3Refusal;
  /** The answer to If-Match on a key that does not exist. */
  ifMatchMissing: S3Refusal;
}

async function refusal(p: Promise<unknown>): Promise<S3Refusal> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof S3ServiceException, `expected an S3 service error, got ${String(err)}`);
    return { status: err.$metadata.httpStatusCode ?? 0, name: err.name };
  }
  assert.fail("the conditional put succeeded but should have been refused");
}

export function s3Smoke(o: S3SmokeOptions): void {
  const s3 = new S3Client({
    endpoint: o.endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId: o.accessKeyId, secretAccessKey: o.secretAccessKey },
  });
  const bucket = uniqueName("smoke");
  const put = (Key: string, Body: string, cond: { IfNoneMatch?: string; IfMatch?: string } = {}) =>
    s3.send(new PutObjectCommand({ Bucket: bucket, Key, Body, ...cond }));
  const get = async (Key: string) => {
    const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key }));
    return { body: await r.Body!.transformToString(), etag: r.ETag };
  };

  test(`${o.server}: S3 put, get and conditional puts`, async (t) => {
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    t.after(async () => {
      const list = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
      for (const obj of list.Contents ?? [])
        await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: obj.Key! }));
      await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
      s3.destroy();
    });

    await t.test("plain put and get round-trip the bytes", async () => {
      const body = "#cloud-config\nruncmd: [echo hi]\n";
      const r = await put("configs/default/plain", body);
      assert.match(r.ETag ?? "", /^"[0-9a-f]{32}"$/);
      const got = await get("configs/default/plain");
      assert.equal(got.body, body);
      assert.equal(got.etag, r.ETag);
    });

    await t.test("If-None-Match: * creates once, then is refused", async () => {
      const first = await put("configs/default/create", "one", { IfNoneMatch: "*" });
      assert.equal(first.$metadata.httpStatusCode, 200);
      assert.deepEqual(await refusal(put("configs/default/create", "two", { IfNoneMatch: "*" })), o.lostRace);
      assert.equal((await get("configs/default/create")).body, "one");
    });

    await t.test("If-Match replaces the current version only", async () => {
      const v1 = await put("configs/default/replace", "v1");
      const v2 = await put("configs/default/replace", "v2", { IfMatch: v1.ETag! });
      assert.notEqual(v2.ETag, v1.ETag);
      assert.deepEqual(
        await refusal(put("configs/default/replace", "v3", { IfMatch: v1.ETag! })),
        o.lostRace,
      );
      assert.equal((await get("configs/default/replace")).body, "v2");
      assert.deepEqual(
        await refusal(put("configs/default/missing", "x", { IfMatch: v1.ETag! })),
        o.ifMatchMissing,
      );
    });

    await t.test("a race of conditional puts has exactly one winner", async () => {
      const racers = 6;
      const create = await Promise.allSettled(
        Array.from({ length: racers }, (_, i) =>
          put("configs/default/race", `racer-${i}`, { IfNoneMatch: "*" }),
        ),
      );
      const winners = create.filter((r) => r.status === "fulfilled");
      assert.equal(winners.length, 1, "If-None-Match: * race");
      for (const r of create)
        if (r.status === "rejected") assert.deepEqual(await refusal(Promise.reject(r.reason)), o.lostRace);
      const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "configs/default/race" }));
      const replace = await Promise.allSettled(
        Array.from({ length: racers }, (_, i) =>
          put("configs/default/race", `update-${i}`, { IfMatch: head.ETag! }),
        ),
      );
      assert.equal(replace.filter((r) => r.status === "fulfilled").length, 1, "If-Match race");
      for (const r of replace)
        if (r.status === "rejected") assert.deepEqual(await refusal(Promise.reject(r.reason)), o.lostRace);
      assert.match((await get("configs/default/race")).body, /^update-\d$/);
    });
  });
}
