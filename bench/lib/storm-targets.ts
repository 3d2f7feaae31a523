/**
 * The boot storm's targets, each started on its own free loopback port and stopped by the
 * caller (SIGTERM, then SIGKILL; its bucket removed): the no-op server, bootseal on the file
 * store, bootseal on SeaweedFS, two bootseal replicas on one SeaweedFS bucket, and OpenBao.
 */
import { execFile, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { env } from "node:process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { optionalPeer, uniqueName } from "../../test/helpers/peers.ts";
import { freePort } from "../../test/helpers/ports.ts";
import { rawS3, seaweedfs } from "../../test/helpers/s3.ts";
import { baoBinary, startOpenBao } from "./openbao.ts";
import { stopChild, track } from "./processes.ts";
import { type BenchServer, benchConfig, dropBucket, startServe } from "./serve.ts";
import type { Protocol } from "./storm-client.ts";
import { type BaoPolicy, bootsealProtocol, openBaoProtocol } from "./storm-protocols.ts";

export const TARGETS = ["noop", "file", "s3", "openbao", "replicas"] as const;
export type TargetName = (typeof TARGETS)[number];

export const LABELS: Record<TargetName, string> = {
  noop: "no-op HTTP server (the client's ceiling)",
  file: "bootseal, file store",
  s3: "bootseal, SeaweedFS S3",
  openbao: "OpenBao, raft on disk",
  replicas: "bootseal, 2 replicas, one SeaweedFS bucket",
};

/** The store a bootseal target uses (for --stores); undefined for noop and OpenBao. */
export const STORE_OF: Record<TargetName, string | undefined> = {
  noop: undefined,
  file: "file",
  s3: "s3",
  openbao: undefined,
  replicas: "s3",
};

export interface Started {
  readonly urls: string[];
  readonly pids: number[];
  /** The store's own processes where it runs here (the SeaweedFS peer), for its CPU. */
  readonly storePids?: number[];
  readonly protocol: Protocol;
  /** bootseal only: each replica's /metrics. */
  readonly metricsUrls: string[];
  readonly describe: string;
  /**
   * bootseal only: whether the real sops decrypts a fetched document to the payload that was
   * published (a sentence for the report).
   */
  confirm?(body: Buffer, expected: string): Promise<string>;
  /** The servers' output (for a failure report). */
  output(): string;
  stop(): Promise<void>;
}

export interface TargetOptions {
  readonly entry: string;
  readonly dir: string;
  readonly payload: (name: string) => string;
  readonly baoTokenUses: number;
  readonly baoPolicy: BaoPolicy;
  /** Node options for each `bootseal serve` (--node-flags), e.g. V8 heap sizes. */
  readonly nodeFlags: readonly string[];
  /** `oneTimeFetch` for bootseal (--one-time); undefined: the service default. */
  readonly oneTime: string | undefined;
}

const run = promisify(execFile);
const NOOP = fileURLToPath(new URL("./noop-server.ts", import.meta.url));

async function startNoop(o: TargetOptions): Promise<Started> {
  const port = await freePort();
  const child = track(spawn(process.execPath, [NOOP, String(port)], { stdio: ["ignore", "pipe", "pipe"] }));
  let out = "";
  child.stderr?.on("data", (c: Buffer) => {
    out += c.toString();
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no-op server did not start: ${out}`)), 30_000);
    child.stdout?.on("data", (c: Buffer) => {
      out += c.toString();
      if (out.includes("listening on")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`no-op server exited (${code}): ${out}`));
    });
  });
  if (child.pid === undefined) throw new Error("no-op server: no pid");
  return {
    urls: [`http://127.0.0.1:${port}`],
    pids: [child.pid],
    protocol: bootsealProtocol("noop", o.payload, false),
    metricsUrls: [],
    describe: "node:http, one fixed 37-byte body for every route",
    output: () => out,
    stop: () => stopChild(child),
  };
}

/** Runs the real sops (the peer) on a fetched document; a failure is reported, not thrown. */
async function sopsDecrypts(dir: string, identity: string, body: Buffer, expected: string): Promise<string> {
  const sops = optionalPeer("SOPS_BIN");
  if (!sops) return "not checked (no sops peer: source .peers/env)";
  const file = join(dir, "fetched.sops.json");
  await writeFile(file, body);
  try {
    const { stdout } = await run(
      sops,
      ["decrypt", "--input-type", "binary", "--output-type", "binary", file],
      {
        env: { PATH: env.PATH, HOME: dir, SOPS_AGE_KEY: identity },
        maxBuffer: 64 * 1024 * 1024,
        timeout: 30_000,
      },
    );
    return stdout === expected
      ? "sops decrypts it to the published payload"
      : "SOPS DECRYPTS IT TO SOMETHING ELSE";
  } catch (err) {
    return `SOPS FAILED: ${(err as Error).message.slice(0, 300)}`;
  }
}

async function bootseal(
  o: TargetOptions,
  servers: BenchServer[],
  controller: string,
  identity: string,
  describe: string,
) {
  const pids = servers.map((s) => s.child.pid as number);
  return {
    confirm: (body: Buffer, expected: string) => sopsDecrypts(o.dir, identity, body, expected),
    urls: servers.map((s) => s.url),
    pids,
    protocol: bootsealProtocol(controller, o.payload, true),
    metricsUrls: servers.map((s) => `${s.url}/metrics`),
    describe,
    output: () => servers.map((s) => s.output().slice(-4000)).join("\n"),
    stop: async () => {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };
}

async function startFile(o: TargetOptions): Promise<Started> {
  // The service's default log level (info: the access log's lines per request included).
  const { config, controller, identity } = await benchConfig({
    uses: 10,
    logLevel: undefined,
    oneTime: o.oneTime,
  });
  const server = await startServe(
    o.entry,
    o.dir,
    "file",
    { ...config, store: `file://${join(o.dir, "store")}`, audit: { path: join(o.dir, "audit.log") } },
    {},
    o.nodeFlags,
  );
  return bootseal(o, [server], controller, identity, `file:// in ${o.dir}`);
}

async function startS3(o: TargetOptions, replicas: number): Promise<Started> {
  const p = seaweedfs();
  if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(p.endpoint))
    throw new Error(`not a loopback endpoint: ${p.endpoint}`);
  const Bucket = uniqueName("bench-storm");
  const s3 = rawS3(p);
  try {
    await s3.send(new CreateBucketCommand({ Bucket }));
  } finally {
    s3.destroy();
  }
  const servers: BenchServer[] = [];
  try {
    const { config, controller, identity } = await benchConfig({
      uses: 10,
      logLevel: undefined,
      oneTime: o.oneTime,
    });
    for (let i = 0; i < replicas; i++) {
      servers.push(
        await startServe(
          o.entry,
          o.dir,
          `s3-${i}`,
          {
            ...config,
            store: `s3://${Bucket}/storm`,
            s3: { endpoint: p.endpoint, region: "us-east-1", forcePathStyle: true },
            audit: { path: join(o.dir, `audit-${i}.log`) },
          },
          {
            AWS_ACCESS_KEY_ID: p.credentials.accessKeyId,
            AWS_SECRET_ACCESS_KEY: p.credentials.secretAccessKey,
          },
          o.nodeFlags,
        ),
      );
    }
    const started = await bootseal(
      o,
      servers,
      controller,
      identity,
      `s3://${Bucket} on SeaweedFS ${p.endpoint}`,
    );
    return {
      ...started,
      storePids: seaweedfsPids(),
      stop: async () => {
        await started.stop();
        await dropBucket(p, Bucket);
      },
    };
  } catch (err) {
    await Promise.all(servers.map((s) => s.stop()));
    await dropBucket(p, Bucket);
    throw err;
  }
}

/** The SeaweedFS peer's process, from the pid file scripts/peers.sh wrote ("PID START"); none when unknown. */
function seaweedfsPids(): number[] {
  const run = env.BOOTSEAL_TEST_PEERS_RUN;
  if (!run) return [];
  try {
    const pid = Number(readFileSync(join(run, "pids", "seaweedfs.pid"), "utf8").split(" ")[0]);
    return Number.isInteger(pid) && pid > 0 ? [pid] : [];
  } catch {
    return [];
  }
}

async function startBao(o: TargetOptions): Promise<Started> {
  const bao = await startOpenBao(baoBinary(), o.dir, { uses: o.baoTokenUses });
  return {
    urls: [bao.url],
    pids: [bao.pid],
    protocol: openBaoProtocol(bao.controller, o.payload, o.baoTokenUses, o.baoPolicy),
    metricsUrls: [],
    describe: `OpenBao ${bao.version}, raft in ${o.dir}, KV v2, ${o.baoPolicy === "template" ? "templated policy" : "a policy per machine"}, token uses ${o.baoTokenUses || "unlimited"}`,
    output: () => bao.output().slice(-4000),
    stop: () => bao.stop(),
  };
}

export function startTarget(name: TargetName, o: TargetOptions): Promise<Started> {
  switch (name) {
    case "noop":
      return startNoop(o);
    case "file":
      return startFile(o);
    case "s3":
      return startS3(o, 1);
    case "replicas":
      return startS3(o, 2);
    case "openbao":
      return startBao(o);
  }
}

/** Scrapes each replica's /metrics (outside the measured client); "" for one that fails. */
export async function scrape(urls: readonly string[]): Promise<string[]> {
  return Promise.all(
    urls.map(async (u) => {
      try {
        const res = await fetch(u, { signal: AbortSignal.timeout(10_000) });
        return res.ok ? await res.text() : "";
      } catch {
        return "";
      }
    }),
  );
}

export const peersHint = () =>
  env.BOOTSEAL_TEST_S3_SEAWEEDFS_ENDPOINT ? "" : " (source .peers/env first: the SeaweedFS peer is needed)";
