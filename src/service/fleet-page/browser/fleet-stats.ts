/**
 * The storm view's numbers, from the rows the page already has (no other data source): phase
 * counts over the last hour, the rate of `succeeded`, the boot-duration distribution with its
 * p50 and p99, the failures grouped by reason and the stuck machines per phase. Each machine's
 * path through its boot is rebuilt from when it first reached each phase (`reached`) and when
 * its current phase began (`since`); a machine that went back and forth counts as in the
 * latest phase it had first reached by then. Pure (no DOM): the unit tests run it under Node.
 */
import { PHASES, type Phase } from "../../../machine/status-protocol.ts";
import { isStuck, phaseOf, timesOf } from "./machine-time.ts";
import type { Row } from "./row.ts";

export interface PhaseSeries {
  /** The time of the first sample (ms since the epoch); sample k is at start + k × stepMs. */
  readonly start: number;
  readonly stepMs: number;
  /** Per phase, the machines in it at each sample. */
  readonly counts: Readonly<Record<Phase, readonly number[]>>;
  /** Machines that reached `succeeded` in the step before each sample. */
  readonly succeeded: readonly number[];
}

/** Phase counts at `samples` times, evenly from `now - windowMs` to `now`. */
export function phaseSeries(
  rows: Iterable<Row>,
  now: number,
  windowMs = 3_600_000,
  samples = 61,
): PhaseSeries {
  const stepMs = windowMs / (samples - 1);
  const start = now - windowMs;
  // Per phase, a difference array over the samples: +1 where a machine enters, -1 where it leaves.
  const diff = Object.fromEntries(PHASES.map((p) => [p, new Array<number>(samples + 1).fill(0)])) as Record<
    Phase,
    number[]
  >;
  const succeeded = new Array<number>(samples).fill(0);
  /** The first sample at or after time t (0 … samples). */
  const firstAtOrAfter = (t: number) => Math.min(samples, Math.max(0, Math.ceil((t - start) / stepMs)));
  for (const r of rows) {
    const path = timesOf(r).steps;
    for (let i = 0; i < path.length; i++) {
      const [from, phase] = path[i]!;
      const to = i + 1 < path.length ? path[i + 1]![0] : Number.POSITIVE_INFINITY;
      const a = firstAtOrAfter(from);
      const b = firstAtOrAfter(to);
      if (a < b) {
        diff[phase][a]! += 1;
        diff[phase][b]! -= 1;
      }
    }
    const done = timesOf(r).reached.succeeded ?? Number.NaN;
    if (done > start - stepMs && done <= now) succeeded[firstAtOrAfter(done)]! += 1;
  }
  const counts = {} as Record<Phase, number[]>;
  for (const p of PHASES) {
    let running = 0;
    counts[p] = diff[p].slice(0, samples).map((d) => (running += d));
  }
  return { start, stepMs, counts, succeeded };
}

export interface Histogram {
  /** Bin i holds durations in [i × binMs, (i + 1) × binMs). */
  readonly binMs: number;
  readonly bins: readonly number[];
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
}

/** The nearest-rank percentile q (0 < q ≤ 1) of sorted values; NaN when there are none. */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length))) - 1]!;
}

/** A bin width of 1, 2 or 5 × a power of ten seconds, so `bins` bins cover `max`. */
function niceBinMs(max: number, bins: number): number {
  const raw = Math.max(1000, max / bins);
  const power = 10 ** Math.floor(Math.log10(raw));
  return ([1, 2, 5, 10].map((m) => m * power).find((w) => w >= raw) ?? 10 * power) as number;
}

/** The boot durations (publish to `succeeded`) of the machines that succeeded. */
export function bootHistogram(rows: Iterable<Row>, bins = 24): Histogram {
  const durations: number[] = [];
  for (const r of rows) {
    if (phaseOf(r) !== "succeeded") continue;
    const { reached } = timesOf(r);
    const ms = (reached.succeeded ?? Number.NaN) - (reached.published ?? Number.NaN);
    if (Number.isFinite(ms) && ms >= 0) durations.push(ms);
  }
  durations.sort((a, b) => a - b);
  const binMs = niceBinMs(durations[durations.length - 1] ?? 0, bins);
  const counts = new Array<number>(Math.max(1, Math.ceil(((durations.at(-1) ?? 0) + 1) / binMs))).fill(0);
  for (const d of durations) counts[Math.floor(d / binMs)]! += 1;
  return {
    binMs,
    bins: counts,
    count: durations.length,
    p50: percentile(durations, 0.5),
    p99: percentile(durations, 0.99),
  };
}

export interface FailureGroup {
  readonly key: string;
  readonly reason: string;
  readonly exitCode: number | undefined;
  readonly count: number;
}

const failureKeys = new WeakMap<Row, string>();

/** The group of a failed row: its reason and exit code (kept per row object). */
export function failureKey(r: Row): string {
  let key = failureKeys.get(r);
  if (key === undefined) {
    key = JSON.stringify([r.failure?.reason ?? "", r.failure?.exitCode ?? null]);
    failureKeys.set(r, key);
  }
  return key;
}

/** The failed machines grouped by reason and exit code, the largest group first. */
export function failureGroups(rows: Iterable<Row>): FailureGroup[] {
  const groups = new Map<string, FailureGroup>();
  for (const r of rows) {
    if (phaseOf(r) !== "failed") continue;
    const key = failureKey(r);
    const g = groups.get(key);
    groups.set(key, {
      key,
      reason: r.failure?.reason ?? "",
      exitCode: r.failure?.exitCode,
      count: (g?.count ?? 0) + 1,
    });
  }
  return [...groups.values()].sort((a, b) => b.count - a.count || (a.reason < b.reason ? -1 : 1));
}

/** The stuck machines per phase (machine-time.ts isStuck), the phases in boot order. */
export function stuckCounts(rows: Iterable<Row>, now: number, thresholdMs: number): [Phase, number][] {
  const counts = new Map<Phase, number>();
  for (const r of rows) {
    if (isStuck(r, now, thresholdMs)) counts.set(phaseOf(r), (counts.get(phaseOf(r)) ?? 0) + 1);
  }
  return PHASES.filter((p) => counts.has(p)).map((p) => [p, counts.get(p)!]);
}
