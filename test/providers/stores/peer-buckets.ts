/**
 * Buckets and directories for the store tests, made with the raw SDK clients (not the code
 * under test) and removed when the test file ends. Bucket names start with store-contract-, so
 * they never collide with other suites sharing the peers.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after } from "node:test";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  ListObjectsV2Command,
  S3Client,
} from "@aws-sdk/client-s3";
import { Storage } from "@google-cloud/storage";
import { peer, uniqueName } from "../../helpers/peers.ts";

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

export interface S3Peer {
  readonly name: string;
  readonly endpoint: string;
  readonly credentials: { accessKeyId: string; secretAccessKey: string };
}

export function seaweedfs(): S3Peer {
  return {
    name: "seaweedfs",
    endpoint: peer("S3_SEAWEEDFS_ENDPOINT"),
    credentials: {
      accessKeyId: peer("S3_SEAWEEDFS_ACCESS_KEY"),
      secretAccessKey: peer("S3_SEAWEEDFS_SECRET_KEY"),
    },
  };
}

export function moto(): S3Peer {
  // moto accepts any credentials.
  return {
    name: "moto",
    endpoint: peer("S3_MOTO_ENDPOINT"),
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  };
}

export function s3Peers(): S3Peer[] {
  return [seaweedfs(), moto()];
}

export function rawS3(p: S3Peer): S3Client {
  return new S3Client({
    endpoint: p.endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: p.credentials,
  });
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
  const s3 = rawS3(p);
  cleanups.push(async () => {
    for (;;) {
      const page = await s3.send(new ListObjectsV2Command({ Bucket }));
      if (!page.Contents?.length) break;
      for (const o of page.Contents) await s3.send(new DeleteObjectCommand({ Bucket, Key: o.Key }));
    }
    await s3.send(new DeleteBucketCommand({ Bucket }));
    s3.destroy();
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
