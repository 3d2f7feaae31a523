/**
 * bench/boot-storm: issue #11's fleet-scale comparison in one run. For each target, one after
 * the other (never two under load at once), each on a free loopback port and stopped at the end
 * whatever happens:
 *   noop      a node:http server answering the same routes with a fixed small body (the
 *             client's ceiling);
 *   file      `bootseal serve` on file:// (a temporary directory);
 *   s3        `bootseal serve` on the SeaweedFS peer (a fresh bucket, removed at the end);
 *   openbao   OpenBao on integrated raft storage on disk (initialised, unsealed, KV v2 and a
 *             `storm` policy set up by the script; bench/lib/openbao.ts);
 *   replicas  two `bootseal serve` on one SeaweedFS bucket, the client round-robining
 *             (--routing request: each request to the next replica; machine: each
 *             machine's requests to one replica, as a balancer with affinity would).
 * The same client (bench/lib/storm-client.ts) runs against each: phase 1 publishes every machine
 * (--concurrency at once), phase 2 is the storm: per machine one fetch with its own token, then
 * five status posts (fetching, decrypted, written, running, succeeded) in order, --concurrency
 * machines in flight. bootseal runs with the bench/service.ts configuration, except the log
 * level: the service default (bench/service.ts sets warn), as an operator would run it.
 *
 *   npm run build && . .peers/env && node_modules/.bin/node bench/boot-storm.ts
 *       [--machines 2000] [--concurrency 200] [--payload-kib 16]
 *       [--targets noop,file,s3,openbao,replicas] [--stores file,s3] [--entry dist|src|PATH/dist/cli/main.js]
 *       [--bao-policy template|per-machine] [--bao-token-uses 0] [--target-timeout S] [--deadline S]
 *       [--routing request|machine] [--node-flags="--max-semi-space-size=8 ..."] [--metrics-dir DIR]
 *       [--one-time off|after-success|after-first-fetch] (bootseal's oneTimeFetch; default: the service's)
 *       [--rate N] (storm machines started per second, an open loop: latency at the same load)
 *       [--warm N] (N other machines published and booted first, unmeasured: the steady state
 *       without the service's warm-up, for a comparison with a cold start)
 *       [--cpu-prof DIR] (each bootseal serve under --cpu-prof, its profiles in DIR/<target>/
 *       with phases.json, the publish's and the storm's start and end; bench/cpu-profile.ts reads them)
 *
 * --stores keeps only the bootseal targets on those stores (replicas: s3); --entry PATH runs
 * another build's dist/cli/main.js; --bao-policy and --bao-token-uses: docs/benchmarks.md.
 *
 * Prints per target: machines/s (storm), req/s, publish/s, p50/p99 per request kind (the
 * fetch's also for the closed loop's first wave, the --concurrency machines started at once,
 * and for the rest), peak RSS of the server process(es), the server's CPU per machine by thread
 * (main thread, libuv pool, V8 workers: /proc/PID/task), store operations per machine
 * (bootseal: its /metrics counter bootseal_store_operations_total, before and after), the
 * ratios to OpenBao, "N machines in X s", a Markdown table for docs/benchmarks.md and the
 * machine. Every non-2xx answer and socket error is counted and printed; the exit status is 1
 * when there was any (or a target failed), 3 when the overall deadline fired.
 */
import { existsSync, readFileSync, rmSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { join, resolve } from "node:path";
import { argv, cpuUsage, exit, version as nodeVersion } from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { cpuMsByThread, cpuMsOfAll, killAll, sampleRss, type ThreadKind } from "./lib/processes.ts";
import {
  crossTokenCheck,
  HttpClient,
  type Kind,
  type Machine,
  newRecorder,
  publishAll,
  type Recorder,
  type Routing,
  storm,
} from "./lib/storm-client.ts";
import { type BaoPolicy, NAMESPACE, payloadMaker } from "./lib/storm-protocols.ts";
import {
  deltaPerMachine,
  deltaPerMachineBySeries,
  formatCount,
  formatMs,
  machinesPerSecond,
  markdownTable,
  publishPerSecond,
  ratio,
  STORE_OPS_COUNTER,
  stormLine,
  sumMetric,
  summarise,
  type TargetResult,
} from "./lib/storm-stats.ts";
import {
  LABELS,
  peersHint,
  STORE_OF,
  scrape,
  startTarget,
  TARGETS,
  type TargetName,
} from "./lib/storm-targets.ts";

/** The Node options of package.json's `start` script (`node FLAGS dist/cli/main.js serve`). */
function startScriptNodeFlags(): string[] {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    scripts: { start: string };
  };
  const words = pkg.scripts.start.split(/\s+/);
  return words.slice(1, words.indexOf("dist/cli/main.js"));
}

const { values: opts } = parseArgs({
  args: argv.slice(2),
  options: {
    machines: { type: "string", default: "2000" },
    concurrency: { type: "string", default: "200" },
    "payload-kib": { type: "string", default: "16" },
    targets: { type: "string", default: TARGETS.join(",") },
    stores: { type: "string", default: "file,s3" },
    entry: { type: "string", default: "dist" },
    "bao-token-uses": { type: "string", default: "0" },
    "bao-policy": { type: "string", default: "template" },
    "target-timeout": { type: "string" },
    deadline: { type: "string" },
    routing: { type: "string", default: "request" },
    "metrics-dir": { type: "string" },
    rate: { type: "string" },
    warm: { type: "string" },
    "one-time": { type: "string" },
    "cpu-prof": { type: "string" },
    // Default: the flags `npm start` runs the service with (package.json), as shipped.
    "node-flags": { type: "string", default: startScriptNodeFlags().join(" ") },
  },
  strict: true,
});
const MACHINES = Number(opts.machines);
if (opts.routing !== "request" && opts.routing !== "machine")
  throw new Error("--routing: request or machine");
const ROUTING: Routing = opts.routing;
const NODE_FLAGS = opts["node-flags"].split(/\s+/).filter((f) => f !== "");
const CONCURRENCY = Number(opts.concurrency);
const PAYLOAD_KIB = Number(opts["payload-kib"]);
const BAO_USES = Number(opts["bao-token-uses"]);
const RATE = opts.rate === undefined ? undefined : Number(opts.rate);
const WARM = Number(opts.warm ?? 0);
const intIn = (n: number, lo: number, hi: number) => Number.isInteger(n) && n >= lo && n <= hi;
if (!intIn(MACHINES, 1, 100_000) || !intIn(CONCURRENCY, 1, 1000) || !intIn(PAYLOAD_KIB, 1, 1024)) {
  throw new Error("--machines 1..100000, --concurrency 1..1000, --payload-kib 1..1024");
}
if (!intIn(BAO_USES, 0, 1000)) throw new Error("--bao-token-uses 0..1000 (0: no use count)");
if (RATE !== undefined && !intIn(RATE, 1, 100_000)) throw new Error("--rate 1..100000 machines/s");
const BAO_POLICY = opts["bao-policy"] as BaoPolicy;
if (BAO_POLICY !== "template" && BAO_POLICY !== "per-machine")
  throw new Error("--bao-policy template|per-machine");
const STORES = new Set(opts.stores.split(",").filter(Boolean));
for (const s of STORES) if (s !== "file" && s !== "s3") throw new Error(`--stores: unknown store ${s}`);
const chosen = opts.targets.split(",").filter(Boolean);
for (const t of chosen)
  if (!(TARGETS as readonly string[]).includes(t)) throw new Error(`--targets: unknown ${t}`);
const targets = TARGETS.filter(
  (t) => chosen.includes(t) && (STORE_OF[t] === undefined || STORES.has(STORE_OF[t])),
);

const REPO = fileURLToPath(new URL("../", import.meta.url));
// dist, src, or the path of another build's dist/cli/main.js (e.g. main's, from `git archive`).
const ENTRY =
  opts.entry === "src"
    ? join(REPO, "src/cli/main.ts")
    : opts.entry === "dist"
      ? join(REPO, "dist/cli/main.js")
      : resolve(opts.entry);
if (!existsSync(ENTRY)) throw new Error(`${ENTRY} is missing: run 'npm run build' first (or --entry src)`);

// Bounded: each target gets its own watchdog (start-up, publish and storm at a pessimistic
// ~4 machines/s), and the whole run a deadline after which everything is killed.
const TARGET_S = Number(opts["target-timeout"] ?? 120 + (MACHINES + WARM) * 0.3);
const DEADLINE_S = Number(opts.deadline ?? targets.length * (TARGET_S + 30) + 60);
const tempDirs = new Set<string>();
function abort(code: number): never {
  killAll();
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
  exit(code);
}
const deadline = setTimeout(() => {
  console.error(`bench/boot-storm: overall deadline (${DEADLINE_S} s) fired; killing the servers`);
  abort(3);
}, DEADLINE_S * 1000);
deadline.unref();
for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => abort(130));

const MiB = (kib: number) => kib / 1024;
const CPU_PROF = opts["cpu-prof"] === undefined ? undefined : resolve(opts["cpu-prof"]);
/** The monotonic clock V8's profiles count in (µs); the same clock in every process. */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

interface Outcome {
  readonly result: TargetResult;
  readonly rec: Recorder;
}

const THREAD_LABELS: Record<ThreadKind, string> = {
  main: "main thread",
  pool: "libuv pool",
  v8: "V8 workers",
  other: "other",
};

async function runTarget(name: TargetName, payload: (n: string) => string): Promise<Outcome | undefined> {
  const dir = await mkdtemp(join(tmpdir(), `bootseal-storm-${name}-`));
  tempDirs.add(dir);
  const ac = new AbortController();
  const watchdog = setTimeout(() => ac.abort(new Error(`target watchdog (${TARGET_S} s)`)), TARGET_S * 1000);
  let started: Awaited<ReturnType<typeof startTarget>> | undefined;
  let client: HttpClient | undefined;
  const profDir = CPU_PROF === undefined ? undefined : join(CPU_PROF, name);
  const phases: Record<string, number> = {};
  try {
    if (profDir !== undefined) await mkdir(profDir, { recursive: true });
    started = await startTarget(name, {
      entry: ENTRY,
      dir,
      payload,
      baoTokenUses: BAO_USES,
      baoPolicy: BAO_POLICY,
      nodeFlags:
        profDir === undefined ? NODE_FLAGS : [...NODE_FLAGS, "--cpu-prof", `--cpu-prof-dir=${profDir}`],
      oneTime: opts["one-time"],
    });
    console.log(`\n== ${LABELS[name]}: ${started.describe} (${started.urls.join(", ")})`);
    const machines: Machine[] = Array.from({ length: MACHINES }, (_, i) => ({ name: `m${i}` }));
    client = new HttpClient(started.urls, CONCURRENCY, ac.signal, ROUTING);
    if (WARM > 0) {
      const warm: Machine[] = Array.from({ length: WARM }, (_, i) => ({ name: `w${i}` }));
      const unmeasured = newRecorder();
      await publishAll(client, started.protocol, warm, CONCURRENCY, unmeasured, ac.signal);
      await storm(client, started.protocol, warm, CONCURRENCY, WARM, unmeasured, ac.signal, RATE);
      if (unmeasured.failures.length > 0) throw new Error(`warm-up: ${unmeasured.failures.length} failures`);
    }
    const rec = newRecorder();
    const rss = sampleRss(started.pids);
    const m0 = await scrape(started.metricsUrls);
    const cpu0 = cpuMsOfAll(started.pids);
    const threads0 = cpuMsByThread(started.pids);
    phases.publishStart = monotonicUs();
    const pub = await publishAll(client, started.protocol, machines, CONCURRENCY, rec, ac.signal);
    phases.publishEnd = monotonicUs();
    const cpu1 = cpuMsOfAll(started.pids);
    const threads1 = cpuMsByThread(started.pids);
    const m1 = await scrape(started.metricsUrls);
    // Not for the no-op server: it answers every token.
    const cross =
      name === "noop"
        ? undefined
        : await crossTokenCheck(client, started.protocol, machines[0], machines[1] as Machine);
    if (cross) rec.failures.push(cross);
    // Outside the measured storm: m0's document, fetched before the storm (one-time delivery
    // deletes it after its `succeeded`), for the real sops to decrypt afterwards (bootseal only).
    const first = machines[0] as Machine;
    const early =
      started.confirm && first.token !== undefined
        ? await started.protocol.fetch(client, first, first.token).catch((err: Error) => err)
        : undefined;
    const rssBefore = rss.now();
    const cpu2 = cpuMsOfAll(started.pids);
    const threads2 = cpuMsByThread(started.pids);
    const store2 = cpuMsOfAll(started.storePids ?? []);
    const client2 = cpuUsage();
    phases.stormStart = monotonicUs();
    const st = await storm(
      client,
      started.protocol,
      machines,
      CONCURRENCY,
      Math.max(1, Math.floor(MACHINES / 50)),
      rec,
      ac.signal,
      RATE,
    );
    phases.stormEnd = monotonicUs();
    const cpu3 = cpuMsOfAll(started.pids);
    const threads3 = cpuMsByThread(started.pids);
    const store3 = cpuMsOfAll(started.storePids ?? []);
    const client3 = cpuUsage(client2);
    const m2 = await scrape(started.metricsUrls);
    if (opts["metrics-dir"] !== undefined) {
      // Every scrape of every replica, for a closer look (store latency by op, GC, ...).
      const dir = opts["metrics-dir"];
      await mkdir(dir, { recursive: true });
      for (const [stage, texts] of [
        ["publish-before", m0],
        ["storm-before", m1],
        ["storm-after", m2],
      ] as const)
        for (const [i, text] of texts.entries())
          await writeFile(join(dir, `${name}-${i}-${stage}.prom`), text);
    }
    let confirmed = "";
    if (started.confirm && early !== undefined) {
      confirmed =
        early instanceof Error
          ? `fetch failed: ${early.message}`
          : await started.confirm(early.body, payload(first.name));
      if (!/^(sops decrypts|not checked)/.test(confirmed))
        rec.failures.push({ kind: "fetch", machine: first.name, status: undefined, message: confirmed });
    }
    const rssAfter = rss.now();
    const peaks = rss.stop();
    if (ac.signal.aborted) throw ac.signal.reason;
    const lat = (k: Kind) => summarise(rec.latencies[k]);
    const hasMetrics = started.metricsUrls.length > 0;
    const ops = (a: string[], b: string[], metric: string) =>
      hasMetrics ? deltaPerMachine(a, b, metric, MACHINES) : undefined;
    const result: TargetResult = {
      label: LABELS[name],
      machines: MACHINES,
      stormSeconds: st.seconds,
      publishSeconds: pub.seconds,
      stormRequests: st.requests,
      fetch: lat("fetch"),
      status: lat("status"),
      publish: lat("publish"),
      peakRssMiB: peaks.map(MiB),
      storeOpsPerMachine: ops(m1, m2, STORE_OPS_COUNTER),
      cpuMsPerMachine: { publish: (cpu1 - cpu0) / MACHINES, storm: (cpu3 - cpu2) / MACHINES },
      stormCpuMsPerMachine: {
        store: started.storePids?.length ? (store3 - store2) / MACHINES : undefined,
        client: (client3.user + client3.system) / 1000 / MACHINES,
      },
      errors: rec.failures.length,
    };
    const line = (k: Kind) => {
      const s = lat(k);
      return `${k} ${formatMs(s.p50)} / ${formatMs(s.p99)} / ${formatMs(s.max)} (${formatCount(s.count)})`;
    };
    console.log(
      `  publish: ${formatCount(MACHINES)} machines in ${pub.seconds.toFixed(1)} s, ${formatCount(publishPerSecond(result))}/s (${formatCount(pub.requests)} requests)`,
    );
    console.log(
      `  storm: ${stormLine(result)}, ${formatCount(machinesPerSecond(result))} machines/s, ${formatCount(st.requests / st.seconds)} req/s`,
    );
    console.log(`  latency p50 / p99 / max (count): ${line("publish")}; ${line("fetch")}; ${line("status")}`);
    if (rec.fetchByWave.first.length > 0) {
      // The closed loop starts --concurrency machines at the same instant: that wave's fetches
      // all meet each other at the store, and they are a share of the p99 (2 % of 10,000).
      const first = summarise(rec.fetchByWave.first);
      const rest = summarise(rec.fetchByWave.rest);
      console.log(
        `  fetch p50 / p99: the first wave (${formatCount(first.count)} machines started at once) ${formatMs(first.p50)} / ${formatMs(first.p99)}; the rest ${formatMs(rest.p50)} / ${formatMs(rest.p99)}`,
      );
    }
    console.log(
      `  peak RSS ${peaks.map((k) => `${formatCount(MiB(k))} MiB`).join(" + ")} (VmHWM and 100 ms VmRSS samples); RSS (all processes) ${formatCount(MiB(rssBefore))} MiB before the storm, ${formatCount(MiB(rssAfter))} MiB after`,
    );
    console.log(
      `  server CPU (user + system, all its processes) per machine: publish ${formatCount(result.cpuMsPerMachine?.publish, 1)} ms, storm ${formatCount(result.cpuMsPerMachine?.storm, 1)} ms`,
    );
    const byThread = (before: Record<ThreadKind, number>, after: Record<ThreadKind, number>) =>
      (["main", "pool", "v8", "other"] as const)
        .map((k) => `${THREAD_LABELS[k]} ${formatCount((after[k] - before[k]) / MACHINES, 2)}`)
        .join(", ");
    console.log(
      `  server CPU ms per machine by thread: publish ${byThread(threads0, threads1)}; storm ${byThread(threads2, threads3)}`,
    );
    {
      const { store, client } = result.stormCpuMsPerMachine ?? {};
      const all = (result.cpuMsPerMachine?.storm ?? 0) + (store ?? 0) + (client ?? 0);
      const cores = (all * MACHINES) / 1000 / st.seconds;
      console.log(
        `  storm CPU per machine: server ${formatCount(result.cpuMsPerMachine?.storm, 1)} ms${store === undefined ? "" : `, store (the SeaweedFS process) ${formatCount(store, 1)} ms`}, client (this process) ${formatCount(client, 1)} ms: together ${cores.toFixed(2)} of the machine's ${cpus().length} cores busy`,
      );
    }
    if (hasMetrics) {
      const hist = "bootseal_store_operation_duration_seconds_count";
      const f = (n: number | undefined) => formatCount(n, 1);
      console.log(
        `  store operations per machine (${STORE_OPS_COUNTER}): storm ${f(result.storeOpsPerMachine)}, publish ${f(ops(m0, m1, STORE_OPS_COUNTER))}; store calls per machine from the latency histogram's count: storm ${f(ops(m1, m2, hist))}, publish ${f(ops(m0, m1, hist))}`,
      );
      const mib = (metric: string) =>
        m2.map((text) => formatCount(MiB((sumMetric(text, metric) ?? Number.NaN) / 1024))).join(" + ");
      console.log(
        `  memory after the storm (the service's metrics, MiB): heap used ${mib("nodejs_heap_size_used_bytes")}, heap total ${mib("nodejs_heap_size_total_bytes")}, external ${mib("nodejs_external_memory_bytes")}, RSS ${mib("process_resident_memory_bytes")}`,
      );
      const series = [...deltaPerMachineBySeries(m1, m2, STORE_OPS_COUNTER, MACHINES)];
      console.log(
        `  storm store operations per machine by op and outcome: ${series.map(([k, v]) => `${k} ${f(v)}`).join(", ")}`,
      );
    }
    console.log(
      `  cross-machine fetch (m0's token, m1's config): ${name === "noop" ? "not checked" : cross ? "ALLOWED" : "refused"}${confirmed ? `; m0's document: ${confirmed}` : ""}`,
    );
    console.log(
      `  verified: ${rec.verified} sampled fetch bodies ${name === "noop" ? "(not checked: fixed body)" : name === "openbao" ? "are the secret written" : "are SOPS documents"}`,
    );
    printFailures(rec);
    return { result, rec };
  } catch (err) {
    console.error(`  ${LABELS[name]}: FAILED: ${(err as Error).message}${peersHint()}`);
    if (started) console.error(`  server output (end):\n${started.output()}`);
    return undefined;
  } finally {
    clearTimeout(watchdog);
    client?.close();
    await started?.stop();
    if (profDir !== undefined) await writeFile(join(profDir, "phases.json"), JSON.stringify(phases));
    await rm(dir, { recursive: true, force: true });
    tempDirs.delete(dir);
  }
}

function printFailures(rec: Recorder): void {
  if (rec.failures.length === 0) {
    console.log("  errors: 0");
    return;
  }
  const by = new Map<string, number>();
  for (const f of rec.failures) {
    const key = `${f.kind} ${f.status ?? "socket"}`;
    by.set(key, (by.get(key) ?? 0) + 1);
  }
  console.log(
    `  ERRORS: ${rec.failures.length} (${[...by].map(([k, n]) => `${k} ×${n}`).join(", ")}); the first 20:`,
  );
  for (const f of rec.failures.slice(0, 20))
    console.log(`    ${f.kind} ${NAMESPACE}/${f.machine}: ${f.message}`);
}

const startedAt = new Date();
const load0 = loadavg();
console.log(
  `bench/boot-storm: ${formatCount(MACHINES)} machines, ${CONCURRENCY} in flight, ${PAYLOAD_KIB} KiB payload, targets ${targets.join(",")}; ${RATE === undefined ? "closed loop" : `storm at ${RATE} machines/s`}; routing ${ROUTING}; oneTimeFetch ${opts["one-time"] ?? "default"}; ${ENTRY.replace(REPO, "")} on ${nodeVersion}${NODE_FLAGS.length ? ` ${NODE_FLAGS.join(" ")}` : ""}; watchdog ${TARGET_S} s per target, deadline ${DEADLINE_S} s`,
);
const payload = payloadMaker(PAYLOAD_KIB * 1024);
const outcomes = new Map<TargetName, Outcome | undefined>();
for (const t of targets) outcomes.set(t, await runTarget(t, payload));

const results = [...outcomes.values()].flatMap((o) => (o ? [o.result] : []));
const bao = outcomes.get("openbao")?.result;
console.log("\n== summary");
for (const r of results) console.log(`  ${r.label}: ${stormLine(r)}`);
if (bao) {
  for (const r of results) {
    if (r === bao) continue;
    console.log(
      `  ${r.label} ÷ OpenBao: machines/s ${ratio(machinesPerSecond(r), machinesPerSecond(bao))}, publish/s ${ratio(publishPerSecond(r), publishPerSecond(bao))}, p99 fetch ${ratio(r.fetch.p99, bao.fetch.p99)}, status ${ratio(r.status.p99, bao.status.p99)}, publish ${ratio(r.publish.p99, bao.publish.p99)}`,
    );
  }
}
const one = outcomes.get("s3")?.result;
const two = outcomes.get("replicas")?.result;
if (one && two) {
  console.log(
    `  2 replicas ÷ 1 on SeaweedFS: machines/s ${ratio(machinesPerSecond(two), machinesPerSecond(one))}`,
  );
}
console.log(`\n${markdownTable(results, bao)}\n`);
const cpu = cpus();
console.log(
  `machine: ${cpu.length} × ${cpu[0]?.model ?? "?"}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${nodeVersion}; load average ${load0.map((l) => l.toFixed(2)).join(" ")} at start, ${loadavg()
    .map((l) => l.toFixed(2))
    .join(
      " ",
    )} at end; ${startedAt.toISOString()}, ${((Date.now() - startedAt.getTime()) / 1000).toFixed(0)} s`,
);
const failedTargets = targets.filter((t) => outcomes.get(t) === undefined);
const errors = results.reduce((a, r) => a + r.errors, 0);
if (failedTargets.length || errors) {
  console.log(
    `NOTE: ${errors} failed requests; targets that did not complete: ${failedTargets.join(",") || "none"}`,
  );
  process.exitCode = 1;
}
clearTimeout(deadline);
