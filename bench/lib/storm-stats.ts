/**
 * The pure parts of bench/boot-storm.ts: percentiles, the Prometheus text parser for the
 * service's store-operation counter, ratios and the result table. No I/O, so
 * test/bench/boot-storm-client.test.ts checks them with nothing running.
 */

/** Nearest-rank percentile (p in 0..100) of an ascending array; NaN when it is empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  if (p <= 0) return sorted[0] as number;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, rank) - 1] as number;
}

export interface LatencySummary {
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export function summarise(samples: readonly number[]): LatencySummary {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? (sorted[sorted.length - 1] as number) : Number.NaN,
  };
}

// A sample line of the text exposition format: name, optional {labels}, value, optional timestamp.
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+-?\d+)?\s*$/;

/**
 * The sum of every series of one metric in Prometheus text (all label combinations), or
 * undefined when no series of that name is present. Comments, other metrics and the
 * `_created` series prom-client may add are ignored; a label value may hold spaces or braces.
 */
export function sumMetric(text: string, name: string): number | undefined {
  const series = seriesOf([text], name);
  return series.size === 0 ? undefined : [...series.values()].reduce((a, b) => a + b, 0);
}

/** Each series of one metric (its label set as printed, "" for none), summed over the texts. */
function seriesOf(texts: readonly string[], name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const text of texts) {
    for (const raw of text.split("\n")) {
      const line = raw.trim();
      if (line === "" || line.startsWith("#")) continue;
      const m = SAMPLE.exec(line);
      if (!m || m[1] !== name) continue;
      const value = Number(m[3]);
      if (!Number.isFinite(value)) continue;
      out.set(m[2] ?? "", (out.get(m[2] ?? "") ?? 0) + value);
    }
  }
  return out;
}

/** The counter the service exports for store calls (op: get|put|head|delete|list, outcome). */
export const STORE_OPS_COUNTER = "bootseal_store_operations_total";

/**
 * The growth of a metric (summed over its series and over the replicas) between two scrapes of
 * each replica, per machine; undefined when a replica's later scrape lacks the metric.
 */
export function deltaPerMachine(
  before: readonly string[],
  after: readonly string[],
  metric: string,
  machines: number,
): number | undefined {
  let delta = 0;
  for (let i = 0; i < after.length; i++) {
    const a = sumMetric(after[i] as string, metric);
    if (a === undefined) return undefined;
    delta += a - (sumMetric(before[i] ?? "", metric) ?? 0);
  }
  return machines > 0 && after.length > 0 ? delta / machines : undefined;
}

/**
 * deltaPerMachine for each series of a metric (its label set, as printed), summed over the
 * replicas; series that did not grow are left out.
 */
export function deltaPerMachineBySeries(
  before: readonly string[],
  after: readonly string[],
  metric: string,
  machines: number,
): Map<string, number> {
  const a = seriesOf(before, metric);
  const delta = new Map<string, number>();
  for (const [series, value] of seriesOf(after, metric)) {
    const grown = value - (a.get(series) ?? 0);
    if (grown > 0 && machines > 0) delta.set(series, grown / machines);
  }
  return delta;
}

/** One target's results, as the table and the ratios need them. */
export interface TargetResult {
  readonly label: string;
  readonly machines: number;
  readonly stormSeconds: number;
  readonly publishSeconds: number;
  readonly stormRequests: number;
  readonly fetch: LatencySummary;
  readonly status: LatencySummary;
  readonly publish: LatencySummary;
  /** Per server process (two for the replicas). */
  readonly peakRssMiB: readonly number[];
  readonly storeOpsPerMachine: number | undefined;
  /** CPU time of the server process(es) per machine, publish and storm phases (ms); undefined: not measured. */
  readonly cpuMsPerMachine?: { readonly publish: number; readonly storm: number } | undefined;
  /** The storm's CPU outside the server: the store's process (SeaweedFS; undefined when not here) and the client's. */
  readonly stormCpuMsPerMachine?: { readonly store: number | undefined; readonly client: number } | undefined;
  readonly errors: number;
}

export const machinesPerSecond = (r: TargetResult): number => r.machines / r.stormSeconds;
export const publishPerSecond = (r: TargetResult): number => r.machines / r.publishSeconds;

/** `1,234` for counts and rates; `n/a` for a missing or non-finite value. */
export function formatCount(n: number | undefined, digits = 0): string {
  if (n === undefined || !Number.isFinite(n)) return "n/a";
  return n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function formatMs(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return "n/a";
  return `${formatCount(ms, ms < 10 ? 1 : 0)} ms`;
}

/** target ÷ reference, two decimals and `×`; `n/a` when either is missing or zero. */
export function ratio(value: number | undefined, reference: number | undefined): string {
  if (value === undefined || reference === undefined || !Number.isFinite(value) || !(reference > 0)) {
    return "n/a";
  }
  return `${(value / reference).toFixed(2)}×`;
}

/** `10,000 machines in 42.1 s`: the storm time of one target. */
export function stormLine(r: TargetResult): string {
  return `${formatCount(r.machines)} machines in ${r.stormSeconds.toFixed(1)} s`;
}

/**
 * The Markdown table for docs/benchmarks.md: one row per target, the ratios against the
 * reference row (OpenBao) when it is there. Rates: higher is better; p99s: lower is better.
 */
export function markdownTable(rows: readonly TargetResult[], reference: TargetResult | undefined): string {
  const head = [
    "target",
    "storm, machines/s",
    `${formatCount(rows[0]?.machines ?? 0)} machines`,
    "req/s",
    "publish/s",
    "fetch p99",
    "status p99",
    "publish p99",
    "peak RSS",
    "store ops/machine",
    "server CPU ms/machine (publish + storm)",
    "machines/s ÷ OpenBao",
    "publish/s ÷ OpenBao",
    "fetch p99 ÷ OpenBao",
    "status p99 ÷ OpenBao",
    "errors",
  ];
  const lines = [`| ${head.join(" | ")} |`, `| --- |${" ---: |".repeat(head.length - 1)}`];
  for (const r of rows) {
    const ref = reference && reference !== r ? reference : undefined;
    lines.push(
      `| ${[
        r.label,
        formatCount(machinesPerSecond(r)),
        `${r.stormSeconds.toFixed(1)} s`,
        formatCount(r.stormRequests / r.stormSeconds),
        formatCount(publishPerSecond(r)),
        formatMs(r.fetch.p99),
        formatMs(r.status.p99),
        formatMs(r.publish.p99),
        r.peakRssMiB.length ? `${r.peakRssMiB.map((m) => formatCount(m)).join(" + ")} MiB` : "n/a",
        formatCount(r.storeOpsPerMachine, 1),
        r.cpuMsPerMachine
          ? `${formatCount(r.cpuMsPerMachine.publish, 1)} + ${formatCount(r.cpuMsPerMachine.storm, 1)}`
          : "n/a",
        ref ? ratio(machinesPerSecond(r), machinesPerSecond(ref)) : "–",
        ref ? ratio(publishPerSecond(r), publishPerSecond(ref)) : "–",
        ref ? ratio(r.fetch.p99, ref.fetch.p99) : "–",
        ref ? ratio(r.status.p99, ref.status.p99) : "–",
        formatCount(r.errors),
      ].join(" | ")} |`,
    );
  }
  return lines.join("\n");
}
