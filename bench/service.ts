/**
 * bench/service: HTTP load on a real `bootseal serve` process (autocannon, loopback only), for
 *   - publish: PUT /v1/machines/bench/<name>/config, a 4 KiB plaintext payload, a new machine
 *     name for every request (controller token);
 *   - fetch:   GET  /v1/machines/bench/<name>/config with each machine's bootstrap token
 *     (round robin over the machines the publish case made; every fetch takes one token use,
 *     so the bench config allows 1,000,000 uses);
 *   - status:  POST /v1/machines/bench/<name>/status {"phase":"running",…} with the token;
 * against two stores: file:// in a temporary directory and s3:// on the SeaweedFS peer (a
 * fresh bucket, emptied and removed at the end). The creation rule is one age recipient; the
 * audit log goes to a file, the access log is at `warn` (two lines per request at `info`).
 * Every case runs for a fixed time after a short publish warm-up per server; each store gets
 * its own server process, stopped at the end (SIGTERM, then SIGKILL). Non-2xx answers and
 * socket errors are counted and printed, never dropped; the status codes are listed.
 *
 *   npm run build && . .peers/env && npx node bench/service.ts [--duration S] [--connections N]
 *       [--stores file,s3] [--entry dist|src]
 *
 * Bounded: a watchdog kills the servers and exits whatever happens (default: the planned load
 * time plus 110 s; 200 s with the defaults); after such an abort (or Ctrl-C) the S3 bucket
 * (bench-service-…) is left behind until the next `scripts/peers.sh up` empties the peers' data.
 * Exits 1 when any request did not answer 2xx.
 */
import { randomBytes } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { argv, exit, version as nodeVersion } from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { uniqueName } from "../test/helpers/peers.ts";
import { rawS3, seaweedfs } from "../test/helpers/s3.ts";
import { until } from "../test/helpers/until.ts";
import { killAll } from "./lib/processes.ts";
import { type BenchServer, benchConfig, dropBucket, startServe } from "./lib/serve.ts";

// autocannon ships no types: the part of its programmatic API used here.
interface AcHistogram {
  readonly average: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}
interface AcResult {
  readonly duration: number; // seconds
  readonly latency: AcHistogram; // ms
  readonly requests: AcHistogram & { readonly total: number; readonly sent: number };
  readonly errors: number; // socket errors, timeouts included
  readonly timeouts: number;
  readonly non2xx: number;
  readonly "2xx": number;
  readonly statusCodeStats: Record<string, { count: number }>;
}
interface AcRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  setupRequest?: (req: AcRequest, context: Record<string, unknown>) => AcRequest;
  onResponse?: (status: number, body: string) => void;
}
interface AcOptions {
  url: string;
  connections: number;
  duration: number;
  timeout: number;
  requests: AcRequest[];
}
type AcInstance = Promise<AcResult> & { stop(): void };
const autocannon = createRequire(import.meta.url)("autocannon") as (opts: AcOptions) => AcInstance;

const { values: opts } = parseArgs({
  args: argv.slice(2),
  options: {
    duration: { type: "string", default: "10" },
    warmup: { type: "string", default: "2" },
    connections: { type: "string", default: "16" },
    stores: { type: "string", default: "file,s3" },
    entry: { type: "string", default: "dist" },
    "log-level": { type: "string", default: "warn" },
    watchdog: { type: "string" },
  },
  strict: true,
});
const DURATION = Number(opts.duration);
const WARMUP = Number(opts.warmup);
const CONNECTIONS = Number(opts.connections);
const STORES = opts.stores.split(",").filter(Boolean);
if (!(DURATION > 0 && DURATION <= 60 && WARMUP >= 0 && CONNECTIONS >= 1 && CONNECTIONS <= 256)) {
  throw new Error("--duration 1..60, --warmup >= 0, --connections 1..256");
}
for (const s of STORES) if (s !== "file" && s !== "s3") throw new Error(`--stores: unknown store ${s}`);

const REPO = fileURLToPath(new URL("../", import.meta.url));
const DIST = join(REPO, "dist/cli/main.js");
const SRC = join(REPO, "src/cli/main.ts");
const ENTRY = opts.entry === "src" ? SRC : DIST;
if (!existsSync(ENTRY)) throw new Error(`${ENTRY} is missing: run 'npm run build' first (or --entry src)`);

const NS = "bench";
const PAYLOAD_BYTES = 4096;
let tempDir: string | undefined;

/** For the watchdog and signals: kill the servers, remove the temporary directory, exit. */
function abort(code: number): never {
  killAll();
  if (tempDir) rmSync(tempDir, { recursive: true, force: true });
  exit(code);
}

// Stops by itself: whatever hangs, the servers are killed and the process exits.
const WATCHDOG = Number(opts.watchdog ?? STORES.length * (WARMUP + 3 * DURATION) + 110);
const watchdog = setTimeout(() => {
  console.error(`bench/service: watchdog (${WATCHDOG} s) fired; killing the servers`);
  abort(3);
}, WATCHDOG * 1000);
watchdog.unref();
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => abort(130));
}

type Server = BenchServer;

interface Row {
  readonly reqPerSec: number;
  readonly p50: number;
  readonly p99: number;
  readonly ok: number; // 2xx
  readonly total: number; // responses + socket errors
  readonly non2xx: number;
  readonly errors: number;
  readonly codes: string;
}

function summarise(r: AcResult): Row {
  const responses = Object.values(r.statusCodeStats).reduce((a, s) => a + s.count, 0);
  return {
    reqPerSec: responses / r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    ok: r["2xx"],
    total: responses + r.errors,
    non2xx: r.non2xx,
    errors: r.errors,
    codes: Object.entries(r.statusCodeStats)
      .map(([code, s]) => `${code}×${s.count}`)
      .join(" "),
  };
}

async function load(url: string, seconds: number, request: AcRequest): Promise<AcResult> {
  return autocannon({ url, connections: CONNECTIONS, duration: seconds, timeout: 10, requests: [request] });
}

interface Machine {
  readonly name: string;
  readonly token: string;
}

/** Runs the three cases against one server; returns one row per case. */
async function runCases(label: string, server: Server, controller: string): Promise<Map<string, Row>> {
  // A cloud-config of exactly PAYLOAD_BYTES bytes (random base64 content).
  const head = "#cloud-config\nwrite_files:\n  - path: /etc/bench/blob\n    content: ";
  const filler = randomBytes(PAYLOAD_BYTES).toString("base64");
  const payload = `${head}${filler.slice(0, PAYLOAD_BYTES - head.length - 1)}\n`;
  if (Buffer.byteLength(payload) !== PAYLOAD_BYTES) throw new Error("payload size");
  const machines: Machine[] = [];
  const publish = (prefix: string): AcRequest => {
    let n = 0;
    return {
      method: "PUT",
      headers: { authorization: `Bearer ${controller}`, "content-type": "application/octet-stream" },
      body: payload,
      setupRequest(req) {
        req.path = `/v1/machines/${NS}/${prefix}-${n++}/config`;
        return req;
      },
      onResponse(status, body) {
        if (status !== 200 && status !== 201) return;
        const token = (JSON.parse(body) as { bootstrapToken?: string }).bootstrapToken;
        const name = token?.split(".")[2];
        if (token && name) machines.push({ name, token });
      },
    };
  };
  const rows = new Map<string, Row>();

  if (WARMUP > 0) await load(server.url, WARMUP, publish(`w${label}`));
  const warmed = machines.length;
  const pub = await load(server.url, DURATION, publish(`m${label}`));
  rows.set("publish", summarise(pub));
  if (machines.length === 0) throw new Error(`${label}: no publish succeeded: ${server.output()}`);

  // Sanity: one fetch answers the SOPS document the publish stored.
  const first = machines[0] as Machine;
  const check = await fetch(`${server.url}/v1/machines/${NS}/${first.name}/config`, {
    headers: { authorization: `Bearer ${first.token}` },
  });
  const doc = await check.text();
  if (check.status !== 200 || check.headers.get("content-type") !== "application/sops+json") {
    throw new Error(`${label}: sanity fetch answered ${check.status} ${check.headers.get("content-type")}`);
  }
  if (!doc.includes('"sops"') || !doc.includes("ENC[AES256_GCM")) throw new Error(`${label}: not a SOPS doc`);

  let f = 0;
  const fetchReq: AcRequest = {
    method: "GET",
    setupRequest(req) {
      const m = machines[f++ % machines.length] as Machine;
      req.path = `/v1/machines/${NS}/${m.name}/config`;
      req.headers = { ...req.headers, authorization: `Bearer ${m.token}` };
      return req;
    },
  };
  rows.set("fetch", summarise(await load(server.url, DURATION, fetchReq)));

  let s = 0;
  const statusBody = JSON.stringify({ phase: "running", message: "kubeadm join (bench)", attempt: 1 });
  const statusReq: AcRequest = {
    method: "POST",
    body: statusBody,
    setupRequest(req) {
      const m = machines[s++ % machines.length] as Machine;
      req.path = `/v1/machines/${NS}/${m.name}/status`;
      req.headers = {
        ...req.headers,
        authorization: `Bearer ${m.token}`,
        "content-type": "application/json",
      };
      return req;
    },
  };
  rows.set("status", summarise(await load(server.url, DURATION, statusReq)));

  // Sanity: the status posts landed in the machine's history. A "running" post is answered 202
  // and held up to statusReports.coalesce (5 s) before it is written, so the read waits for it.
  let seen = "no answer";
  await until(
    `${label}: the status read to show phase running`,
    async () => {
      const st = await fetch(`${server.url}/v1/machines/${NS}/${first.name}/status`, {
        headers: { authorization: `Bearer ${controller}` },
      });
      const body = (await st.json()) as { phase?: string };
      seen = `${st.status} phase ${body.phase}`;
      return st.status === 200 && body.phase === "running";
    },
    { tries: 80 },
  ).catch(() => {
    throw new Error(`${label}: status read answered ${seen}`);
  });
  console.log(
    `  ${label}: ${machines.length} machines published (${warmed} in the ${WARMUP} s warm-up), payload ${Buffer.byteLength(payload)} B, SOPS document ${Buffer.byteLength(doc)} B`,
  );
  return rows;
}

const started = new Date();
const load0 = loadavg();
const dir = await mkdtemp(join(tmpdir(), "bootseal-bench-service-"));
tempDir = dir;
const results = new Map<string, Map<string, Row>>();
try {
  const { config: base, controller } = await benchConfig({ uses: 1_000_000, logLevel: opts["log-level"] });
  console.log(
    `bench/service: ${ENTRY.replace(REPO, "")} on ${nodeVersion}, ${CONNECTIONS} connections, ${DURATION} s per case (+${WARMUP} s publish warm-up per store)`,
  );

  for (const store of STORES) {
    if (store === "file") {
      const server = await startServe(
        ENTRY,
        dir,
        "file",
        { ...base, store: `file://${join(dir, "store")}`, audit: { path: join(dir, "audit-file.log") } },
        {},
      );
      try {
        results.set("file", await runCases("file", server, controller));
      } finally {
        await server.stop();
      }
    } else {
      const s3Peer = seaweedfs();
      const { endpoint, credentials } = s3Peer;
      if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(endpoint))
        throw new Error(`not a loopback endpoint: ${endpoint}`);
      const s3 = rawS3(s3Peer);
      const Bucket = uniqueName("bench-service");
      await s3.send(new CreateBucketCommand({ Bucket }));
      try {
        const server = await startServe(
          ENTRY,
          dir,
          "s3",
          {
            ...base,
            store: `s3://${Bucket}/bench`,
            s3: { endpoint, region: "us-east-1", forcePathStyle: true },
            audit: { path: join(dir, "audit-s3.log") },
          },
          { AWS_ACCESS_KEY_ID: credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey },
        );
        try {
          results.set("s3", await runCases("s3", server, controller));
        } finally {
          await server.stop();
        }
      } finally {
        s3.destroy();
        await dropBucket(s3Peer, Bucket);
      }
    }
  }
} finally {
  killAll();
  await rm(dir, { recursive: true, force: true });
}

const cell = (r: Row | undefined) =>
  r
    ? [
        r.reqPerSec.toFixed(0),
        r.p50.toFixed(1),
        r.p99.toFixed(1),
        `${((100 * r.ok) / Math.max(1, r.total)).toFixed(2)} % (${r.ok}/${r.total})`,
        String(r.non2xx),
        String(r.errors),
      ]
    : ["–", "–", "–", "–", "–", "–"];
const head = ["req/s", "p50 ms", "p99 ms", "2xx", "non-2xx", "errors"];
const stores = [...results.keys()];
console.log("");
console.log(`| case | ${stores.map((s) => head.map((h) => `${s} ${h}`).join(" | ")).join(" | ")} |`);
console.log(`| --- | ${stores.map(() => head.map(() => "---:").join(" | ")).join(" | ")} |`);
for (const c of ["publish", "fetch", "status"]) {
  console.log(`| ${c} | ${stores.map((s) => cell(results.get(s)?.get(c)).join(" | ")).join(" | ")} |`);
}
console.log(
  "file = file:// in a temporary directory; s3 = s3:// on SeaweedFS (127.0.0.1); 2xx = 2xx answers / (answers + socket errors)",
);
console.log("");
for (const s of stores) {
  for (const [c, r] of results.get(s) ?? []) console.log(`status codes ${s} ${c}: ${r.codes || "none"}`);
}
const cpu = cpus();
console.log(
  `machine: ${cpu.length} × ${cpu[0]?.model ?? "?"}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB; load average ${load0[0]?.toFixed(2)} at start, ${loadavg()[0]?.toFixed(2)} at end; ${started.toISOString()}, ${((Date.now() - started.getTime()) / 1000).toFixed(0)} s`,
);
const bad = [...results.values()].some((m) => [...m.values()].some((r) => r.ok !== r.total));
if (bad) {
  console.log("NOTE: some requests did not answer 2xx (see the status codes above)");
  process.exitCode = 1;
}
clearTimeout(watchdog);
