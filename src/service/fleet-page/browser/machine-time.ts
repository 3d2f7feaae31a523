/**
 * What the page reads from one row about time: its shown phase (a held one first), when that
 * phase began, how long its boot took or has taken so far, whether it is stuck. Pure (no DOM):
 * the unit tests run it under Node.
 */
import { PHASES, type Phase } from "../../../machine/status-protocol.ts";
import type { Row } from "./row.ts";

/** The phases a machine reports while booting: one it stays in too long is stuck. */
const BOOTING: ReadonlySet<Phase> = new Set(["fetching", "decrypted", "written", "running"]);

/** The phase shown: one the service holds (an event reported it) before the stored one. */
export const phaseOf = (r: Row): Phase => r.pending?.phase ?? r.phase;

/** A row's times parsed (ms since the epoch, NaN when not known). */
export interface RowTimes {
  /** When the shown phase began. */
  readonly since: number;
  readonly updated: number;
  /** When this boot first reached each phase. */
  readonly reached: Readonly<Partial<Record<Phase, number>>>;
  /** The boot as (time, phase) steps in time order: each phase reached, then the shown one since. */
  readonly steps: readonly (readonly [number, Phase])[];
}

/**
 * Parsed once per row object: a row is replaced, never changed, when its machine changes, so
 * a draw of 20,000 machines parses only the ones that changed since the last.
 */
const parsed = new WeakMap<Row, RowTimes>();

export function timesOf(r: Row): RowTimes {
  let times = parsed.get(r);
  if (!times) {
    const reached: Partial<Record<Phase, number>> = {};
    const steps: [number, Phase][] = [];
    for (const p of PHASES) {
      const at = Date.parse(r.reached?.[p] ?? "");
      if (Number.isNaN(at)) continue;
      reached[p] = at;
      steps.push([at, p]);
    }
    const since = Date.parse(r.pending?.at ?? r.since ?? r.updatedAt ?? "");
    if (!Number.isNaN(since)) steps.push([since, phaseOf(r)]);
    steps.sort((a, b) => a[0] - b[0]);
    times = { since, updated: Date.parse(r.updatedAt ?? ""), reached, steps };
    parsed.set(r, times);
  }
  return times;
}

/** When the shown phase began (ms since the epoch), NaN when not known. */
export const sinceOf = (r: Row): number => timesOf(r).since;

/**
 * The boot's duration in ms: from its publish to its end (succeeded or failed), or to `now`
 * while it boots; NaN when its publish is not known.
 */
export function bootMs(r: Row, now: number): number {
  const from = timesOf(r).reached.published ?? Number.NaN;
  const phase = phaseOf(r);
  if (phase === "succeeded" || phase === "failed") return sinceOf(r) - from;
  return now - from;
}

/** In a booting phase (fetching to running) for more than `thresholdMs`. */
export function isStuck(r: Row, now: number, thresholdMs: number): boolean {
  return BOOTING.has(phaseOf(r)) && now - sinceOf(r) > thresholdMs;
}
