/**
 * Issue #10 L3 on the real store peers: an s3:// source over MAX_DOCUMENT_BYTES fails with
 * TOO_LARGE (decrypt's exit code) and writes nothing; the stores' get({maxBytes}) refuses one
 * byte over the cap (SeaweedFS S3 and fake-gcs-server), reads exactly at it.
 */
import assert from "node:assert/strict";
import { mkdir, readdir } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { CreateBucketCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { type Bucket, Storage } from "@google-cloud/storage";
import { openStore } from "../../providers/stores/index.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { MAX_DOCUMENT_BYTES } from "../../src/limits.ts";
import { peer, uniqueName } from "../helpers/peers.ts";
import { rawS3, removeS3Bucket, type S3Peer, seaweedfs } from "../helpers/s3.ts";
import { machineEnv, run, tempDir } from "./helpers.ts";

let dir: { path: string; remove: () => Promise<void> };
let s3peer: S3Peer;
let s3: S3Client;
let s3bucket: string;
let gcsEndpoint: string;
let gcsBucket: Bucket;

before(async () => {
  dir = await tempDir("store-cap");
  s3peer = seaweedfs();
  s3 = rawS3(s3peer);
  s3bucket = uniqueName("fetch-cap");
  await s3.send(new CreateBucketCommand({ Bucket: s3bucket }));
  gcsEndpoint = peer("GCS_ENDPOINT");
  [gcsBucket] = await new Storage({ apiEndpoint: gcsEndpoint, projectId: "test" }).createBucket(
    uniqueName("fetch-cap"),
  );
});

after(async () => {
  if (s3bucket) await removeS3Bucket(s3peer, s3bucket);
  s3?.destroy();
  if (gcsBucket) {
    await gcsBucket.deleteFiles({ force: true });
    await gcsBucket.delete();
  }
  await dir?.remove();
});

function s3Env(): Record<string, string | undefined> {
  return machineEnv({
    AWS_ACCESS_KEY_ID: s3peer.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3peer.credentials.secretAccessKey,
    AWS_REGION: "us-east-1",
    AWS_ENDPOINT_URL_S3: s3peer.endpoint,
  });
}

test("an s3:// object one byte over the cap: TOO_LARGE, nothing written", async () => {
  await s3.send(
    new PutObjectCommand({
      Bucket: s3bucket,
      Key: "configs/default/big",
      Body: Buffer.alloc(MAX_DOCUMENT_BYTES + 1, 0x20),
    }),
  );
  const root = join(dir.path, "root");
  await mkdir(root);
  // Its own process: the SDK's credential chain reads the process environment.
  const { code, stderr } = await run(
    [
      "fetch",
      "--from",
      `s3://${s3bucket}/configs/default/big`,
      "--apply",
      "--root",
      root,
      "--deadline",
      "30s",
    ],
    s3Env(),
  );
  assert.equal(code, EXIT_CODES.TOO_LARGE, stderr);
  assert.match(stderr, /larger than 64 MiB/);
  assert.doesNotMatch(stderr, /retrying/);
  assert.deepEqual(await readdir(root), []);
});

test("s3 and gs get({maxBytes}): exactly at the cap reads, one byte over refuses", async () => {
  await s3.send(new PutObjectCommand({ Bucket: s3bucket, Key: "at", Body: Buffer.alloc(1000, 1) }));
  await s3.send(new PutObjectCommand({ Bucket: s3bucket, Key: "over", Body: Buffer.alloc(1001, 1) }));
  await gcsBucket.file("at").save(Buffer.alloc(1000, 1), { resumable: false });
  await gcsBucket.file("over").save(Buffer.alloc(1001, 1), { resumable: false });
  const stores = [
    openStore(`s3://${s3bucket}`, { env: s3Env(), s3: { maxAttempts: 1, credentials: s3peer.credentials } }),
    openStore(`gs://${gcsBucket.name}`, {
      env: machineEnv({ STORAGE_EMULATOR_HOST: gcsEndpoint }),
      gcs: { maxRetries: 0 },
    }),
  ];
  for (const store of stores) {
    assert.equal((await store.get("at", { maxBytes: 1000 }))?.body.byteLength, 1000, store.url);
    await assert.rejects(store.get("over", { maxBytes: 1000 }), { code: "TOO_LARGE" }, store.url);
    assert.equal((await store.get("over"))?.body.byteLength, 1001, store.url);
    assert.equal(await store.get("missing", { maxBytes: 1000 }), null, store.url);
  }
});
