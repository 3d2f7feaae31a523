/**
 * `bootseal serve` for the service benchmarks (bench/service.ts, bench/boot-storm.ts): the
 * bench configuration (one age recipient creation rule, one admin controller token, audit log
 * to a file, no per-address connection cap), the process started through the test harness
 * and tracked for the watchdog, and the S3 bucket clean-up.
 */
import { createHash, randomBytes } from "node:crypto";
import { env } from "node:process";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { removeS3Bucket, type S3Peer } from "../../test/helpers/s3.ts";
import { type Served, serve } from "../../test/service/serve-harness.ts";
import { stopChild, track } from "./processes.ts";

export interface BenchServer extends Served {
  /** SIGTERM, then SIGKILL 5 s later. */
  stop(): Promise<number | null>;
}

/** `bootseal serve` on 127.0.0.1 (a port the kernel picks), tracked until it exits. */
export async function startServe(
  entry: string,
  dir: string,
  name: string,
  config: Record<string, unknown>,
  extraEnv: NodeJS.ProcessEnv,
): Promise<BenchServer> {
  const served = await serve(dir, name, { ...config }, { PATH: env.PATH, HOME: dir, ...extraEnv }, entry);
  track(served.child);
  const stop = async (): Promise<number | null> => {
    await stopChild(served.child);
    return served.child.exitCode;
  };
  return { ...served, stop };
}

/**
 * The shared part of the bench configuration, the controller token that goes with it and the
 * age identity of its creation rule (to decrypt what the service stored).
 * `logLevel` undefined keeps the service default (what an operator runs).
 */
export async function benchConfig(opts: {
  readonly uses: number;
  readonly logLevel: string | undefined;
}): Promise<{ config: Record<string, unknown>; controller: string; identity: string }> {
  const identity = await generateX25519Identity();
  const recipient = await identityToRecipient(identity);
  const controller = randomBytes(32).toString("base64url");
  const config: Record<string, unknown> = {
    creation_rules: [{ age: recipient }],
    controllers: [
      {
        name: "bench",
        tokenSha256: createHash("sha256").update(controller).digest("hex"),
        scopes: ["admin"],
      },
    ],
    bootstrapToken: { ttl: "1h", uses: opts.uses },
    // Every load connection comes from 127.0.0.1: no per-address connection cap.
    limits: { maxConnectionsPerAddress: 0 },
  };
  if (opts.logLevel !== undefined) config.logLevel = opts.logLevel;
  return { config, controller, identity };
}

/** Empties and removes a bench bucket (a failure is reported, not thrown). */
export async function dropBucket(p: S3Peer, Bucket: string): Promise<void> {
  try {
    const removed = await removeS3Bucket(p, Bucket);
    console.log(`  s3: bucket ${Bucket} emptied (${removed} objects) and removed`);
  } catch (err) {
    console.error(`  s3: could not remove bucket ${Bucket}: ${(err as Error).message}`);
  }
}
