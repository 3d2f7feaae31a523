/**
 * The S3 peers (SeaweedFS, moto) and raw SDK clients for them, for set-up and clean-up that
 * must not go through the code under test. Used by the store tests and by the benchmarks.
 */
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListObjectsV2Command,
  S3Client,
} from "@aws-sdk/client-s3";
import { peer, uniqueName } from "./peers.ts";

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

export function rawS3(p: S3Peer): S3Client {
  return new S3Client({
    endpoint: p.endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: p.credentials,
  });
}

/** Deletes every object of the bucket, then the bucket; returns how many objects it deleted. */
export async function removeS3Bucket(p: S3Peer, Bucket: string): Promise<number> {
  const s3 = rawS3(p);
  let removed = 0;
  try {
    for (;;) {
      const page = await s3.send(new ListObjectsV2Command({ Bucket, MaxKeys: 1000 }));
      const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key as string }));
      if (keys.length === 0) break;
      const out = await s3.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: keys, Quiet: true } }));
      if (out.Errors?.length) throw new Error(`DeleteObjects: ${out.Errors.length} failed`);
      removed += keys.length;
    }
    await s3.send(new DeleteBucketCommand({ Bucket }));
    return removed;
  } finally {
    s3.destroy();
  }
}

/** A fresh SeaweedFS bucket for `bootseal serve`: its store URL, config lines and credentials. */
export async function seaweedBucket(
  name: string,
  prefix: string,
): Promise<{ bucket: string; store: string; extra: string[]; env: Record<string, string> }> {
  const p = seaweedfs();
  const bucket = uniqueName(name);
  await rawS3(p).send(new CreateBucketCommand({ Bucket: bucket }));
  return {
    bucket,
    store: `s3://${bucket}/${prefix}`,
    extra: ["s3:", `  endpoint: ${p.endpoint}`, "  region: us-east-1", "  forcePathStyle: true"],
    env: {
      AWS_ACCESS_KEY_ID: p.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: p.credentials.secretAccessKey,
    },
  };
}
