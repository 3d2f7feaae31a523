/**
 * Buckets and directories for the store tests, made with the raw SDK clients (not the code
 * under test) and removed when the test file ends. Bucket names start with store-contract-, so
 * they never collide with other suites sharing the peers.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after } from "node:test";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { Storage } from "@google-cloud/storage";
import { peer, uniqueName } from "../../helpers/peers.ts";
import { moto, rawS3, removeS3Bucket, type S3Peer, seaweedfs } from "../../helpers/s3.ts";

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

export function s3Peers(): S3Peer[] {
  return [seaweedfs(), moto()];
}

/** A fresh bucket on the peer, emptied and removed at the end of the file. */
export async function s3Bucket(p: S3Peer): Promise<string> {
  const Bucket = uniqueName("store-contract");
  const s3 = rawS3(p);
  await s3.send(new CreateBucketCommand({ Bucket }));
  s3.destroy();
  s3BucketCleanup(p, Bucket);
  return Bucket;
}

/** Empties and removes a bucket at the end of the file (one the test made some other way). */
export function s3BucketCleanup(p: S3Peer, Bucket: string): void {
  cleanups.push(async () => {
    await removeS3Bucket(p, Bucket);
  });
}

/** A fresh bucket on fake-gcs-server, removed at the end of the file. */
export async function gcsBucket(): Promise<{ bucket: string; apiEndpoint: string }> {
  const apiEndpoint = peer("GCS_ENDPOINT");
  const storage = new Storage({ apiEndpoint, projectId: "test" });
  const [bucket] = await storage.createBucket(uniqueName("store-contract"));
  cleanups.push(async () => {
    await bucket.deleteFiles({ force: true });
    await bucket.delete();
  });
  return { bucket: bucket.name, apiEndpoint };
}

/** A temporary directory, removed at the end of the file. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "store-contract-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}
