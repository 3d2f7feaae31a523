/**
 * What a list of machines shows of each one's current boot, taken from its status record: when
 * its phase began, when this boot (the latest publish) first reached each phase, and, failed,
 * why. The machine list (`GET /v1/machines`) sends it per machine and the fleet page derives
 * the same from a status record it reads after an event: both from here.
 *
 * Pure, with no Node API: the fleet page's browser bundle imports this file too.
 */
import type { Phase } from "./status-protocol.ts";
import { cutToBytes } from "./text-budget.ts";

/** A failure's reason in a list, at most (UTF-8 bytes of its first line; its start is kept). */
export const REASON_MAX_BYTES = 160;

/** The parts of a status record (and of its history entries) a boot summary reads. */
export interface BootRecord {
  readonly phase: Phase;
  readonly version: number;
  readonly updatedAt: string;
  readonly history: readonly {
    readonly phase: Phase;
    readonly at: string;
    readonly version: number;
    readonly message?: string;
    readonly exitCode?: number;
  }[];
}

export interface BootFailure {
  /** The first line of the failed report's message, cut to REASON_MAX_BYTES ("" when none). */
  readonly reason: string;
  readonly exitCode?: number;
}

export interface BootSummary {
  /** When the current phase began: the first report of the run of it the history ends with. */
  readonly since: string;
  /** When this boot first reached each phase (`published`: the publish), as far as the history goes. */
  readonly reached: Partial<Record<Phase, string>>;
  /** Set when the phase is `failed`: the latest failed report's reason and exit code. */
  readonly failure?: BootFailure;
}

export function bootSummary(r: BootRecord): BootSummary {
  const boot = r.history.filter((e) => e.version === r.version);
  const reached: Partial<Record<Phase, string>> = {};
  for (const e of boot)
    if (reached[e.phase] === undefined || e.at < reached[e.phase]!) reached[e.phase] = e.at;
  let since = r.updatedAt;
  for (let i = boot.length - 1; i >= 0 && boot[i]!.phase === r.phase; i--) since = boot[i]!.at;
  // A plain loop: the browser bundle's lib (es2022) has no findLast.
  let failed: BootRecord["history"][number] | undefined;
  if (r.phase === "failed") for (const e of boot) if (e.phase === "failed") failed = e;
  if (!failed) return { since, reached };
  const firstLine = (failed.message ?? "").trim().split(/\r\n|\r|\n/, 1)[0] ?? "";
  const reason = cutToBytes(firstLine, REASON_MAX_BYTES, { measure: "utf8", keep: "start" });
  return {
    since,
    reached,
    failure: failed.exitCode === undefined ? { reason } : { reason, exitCode: failed.exitCode },
  };
}
