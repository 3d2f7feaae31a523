/**
 * `bootseal serve` for the service benchmarks (bench/service.ts, bench/boot-storm.ts): the
 * bench configuration (one age recipient creation rule, one admin controller token, audit log
 * to a file, no per-address connection cap), the process (tracked for the watchdog), and the
 * S3 bucket clean-up.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { env } from "node:process";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { stringify } from "yaml";
import { removeS3Bucket, type S3Peer } from "../../test/helpers/s3.ts";
import { stopChild, track } from "./processes.ts";

/** Whether the service says it is ready (a refused connection is not). */
async function readyz(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/readyz`)).status === 200;
  } catch {
    return false;
  }
}

export interface BenchServer {
  readonly url: string;
  readonly child: ChildProcess;
  /** The end of what the process wrote to stdout and stderr (its log file). */
  output(): string;
  /** SIGTERM, then SIGKILL 5 s later. */
  stop(): Promise<number | null>;
}

/**
 * `bootseal serve` on 127.0.0.1 (a port the kernel picks), tracked until it exits. Its stdout
 * and stderr go to a file, as under an operator's supervisor: a pipe to this busy process
 * would slow the service's logging (or grow its buffers) whenever the load generator lags.
 */
export async function startServe(
  entry: string,
  dir: string,
  name: string,
  config: Record<string, unknown>,
  extraEnv: NodeJS.ProcessEnv,
  nodeFlags: readonly string[] = [],
): Promise<BenchServer> {
  const file = join(dir, `${name}.yaml`);
  const log = join(dir, `${name}.log`);
  writeFileSync(file, stringify(config));
  const fd = openSync(log, "a");
  const child = spawn(
    process.execPath,
    [...nodeFlags, entry, "serve", "--config", file, "--listen", "127.0.0.1:0"],
    {
      stdio: ["ignore", fd, fd],
      env: { PATH: env.PATH, HOME: dir, ...extraEnv },
      cwd: dir,
    },
  );
  closeSync(fd);
  track(child);
  const output = () => {
    try {
      return readFileSync(log, "utf8").slice(-64 * 1024);
    } catch {
      return "";
    }
  };
  const stop = async (): Promise<number | null> => {
    await stopChild(child);
    return child.exitCode;
  };
  // Ready once it has printed its URL and its configuration summary and /readyz answers 200
  // (the fetcher executables hashed and signed, as a balancer would wait for; bounded: 30 s).
  for (let waited = 0; ; waited += 100) {
    const out = output();
    const url = /listening on (http\S+)/.exec(out)?.[1];
    if (url && out.includes("controllers:") && (await readyz(url))) return { url, child, output, stop };
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${name}: serve exited early: ${out}`);
    if (waited > 30_000) {
      await stop();
      throw new Error(`${name}: serve did not start: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The shared part of the bench configuration, the controller token that goes with it and the
 * age identity of its creation rule (to decrypt what the service stored).
 * `logLevel` undefined keeps the service default (what an operator runs).
 */
export async function benchConfig(opts: {
  readonly uses: number;
  readonly logLevel: string | undefined;
  /** `oneTimeFetch`; undefined keeps the service default. */
  readonly oneTime?: string | undefined;
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
  if (opts.oneTime !== undefined) config.oneTimeFetch = opts.oneTime;
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
