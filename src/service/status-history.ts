/**
 * A status record's history, bounded: the last HISTORY_LIMIT entries, at most
 * HISTORY_MAX_BYTES of them, each entry at most HISTORY_ENTRY_MAX_BYTES (issue #10: unbounded
 * entries made a record of megabytes, rewritten on every report).
 */
import { PHASE_ORDER } from "../machine/status-protocol.ts";
import { cutToBytes } from "../machine/text-budget.ts";
import type { StatusEntry } from "./status-record.ts";

export const HISTORY_LIMIT = 100;
/** Encoded (JSON, UTF-8) bytes of a status record's history, at most. */
export const HISTORY_MAX_BYTES = 64 * 1024;
/** Encoded bytes of one history entry, at most: its output keeps its end, then its message its start. */
export const HISTORY_ENTRY_MAX_BYTES = 24 * 1024;
/** Of which a cut message keeps at most this much (its start); the output (its end) gets the rest. */
const HISTORY_MESSAGE_SHARE_BYTES = 8 * 1024;

const encodedBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value));

/** The start of a message within `budget` bytes of its JSON string. */
const keepStart = (text: string, budget: number) =>
  cutToBytes(text, budget, { measure: "json", keep: "start" });
/** The end of an output within `budget` bytes of its JSON string. */
const keepEnd = (text: string, budget: number) => cutToBytes(text, budget, { measure: "json", keep: "end" });

/** An entry as stored: cut to HISTORY_ENTRY_MAX_BYTES (the output keeps its end, as a tail should). */
export function boundEntry(entry: StatusEntry): StatusEntry {
  let size = encodedBytes(entry);
  if (size <= HISTORY_ENTRY_MAX_BYTES) return entry;
  let out: StatusEntry = { ...entry, truncated: true };
  // The message first gets a fixed share (its start), so the output tail keeps room too.
  if (out.message !== undefined && encodedBytes(out.message) - 2 > HISTORY_MESSAGE_SHARE_BYTES) {
    out = { ...out, message: keepStart(out.message, HISTORY_MESSAGE_SHARE_BYTES) };
  }
  size = encodedBytes(out);
  if (size > HISTORY_ENTRY_MAX_BYTES && out.output !== undefined) {
    const own = encodedBytes(out.output) - 2;
    out = { ...out, output: keepEnd(out.output, Math.max(0, own - (size - HISTORY_ENTRY_MAX_BYTES))) };
    size = encodedBytes(out);
  }
  if (size > HISTORY_ENTRY_MAX_BYTES && out.message !== undefined) {
    const own = encodedBytes(out.message) - 2;
    out = { ...out, message: keepStart(out.message, Math.max(0, own - (size - HISTORY_ENTRY_MAX_BYTES))) };
  }
  return out;
}

/**
 * Whether `entry` was made before `other`: an earlier `at` (ISO-8601 UTC strings sort as their
 * instants). `held`: `entry` is a report a replica held (status-coalescer.ts), so it reaches
 * the store after reports made later through other replicas, maybe in the same millisecond
 * (on loopback, a machine's next report can be stamped in the one its held report was). A
 * held report is intermediate, and a machine starts a new boot only in a new fetcher process,
 * so within one millisecond it goes before what comes later in a boot (a held `running`
 * before the `succeeded` another replica wrote). Any other tie keeps arrival order.
 */
export function madeBefore(
  entry: Pick<StatusEntry, "at" | "phase">,
  other: Pick<StatusEntry, "at" | "phase">,
  held: boolean,
): boolean {
  if (entry.at !== other.at) return entry.at < other.at;
  return held && (PHASE_ORDER.get(entry.phase) ?? 0) < (PHASE_ORDER.get(other.phase) ?? 0);
}

/**
 * Adds entries to a history in time order and bounds it: at most HISTORY_LIMIT entries (the
 * oldest go first) and HISTORY_MAX_BYTES encoded (the oldest machine reports go first, then the
 * oldest publishes). The newest entry and the latest `published` entry always stay, so a
 * chatty machine can neither grow its record without bound nor push its publish out of the
 * history. Each entry goes after the last one it was not made before (madeBefore), not simply
 * at the end: the first `held` of `entries` are reports a replica held, which can reach the
 * store after a later one written by another replica.
 */
export function mergeHistory(
  history: readonly StatusEntry[],
  entries: readonly StatusEntry[],
  held = 0,
): StatusEntry[] {
  const all = [...history];
  entries.forEach((entry, i) => {
    let at = all.length;
    while (at > 0 && madeBefore(entry, all[at - 1]!, i < held)) at--;
    all.splice(at, 0, boundEntry(entry));
  });
  const newest = all.length - 1;
  const latestPublish = all.findLastIndex((e) => e.phase === "published");
  const protectedAt = (i: number) => i === newest || i === latestPublish;
  const sizes = all.map(encodedBytes);
  const keep = all.map(() => true);
  let count = all.length;
  let bytes = 2 + sizes.reduce((a, b) => a + b + 1, 0) - 1; // [a,b,...]
  const drop = (i: number) => {
    keep[i] = false;
    count--;
    bytes -= sizes[i]! + 1;
  };
  for (let i = 0; i < all.length && count > HISTORY_LIMIT; i++) if (!protectedAt(i)) drop(i);
  for (const publishes of [false, true]) {
    for (let i = 0; i < all.length && bytes > HISTORY_MAX_BYTES; i++) {
      if (keep[i] && !protectedAt(i) && (all[i]!.phase === "published") === publishes) drop(i);
    }
  }
  return all.filter((_, i) => keep[i]);
}

/** One entry: mergeHistory's common case. */
export function appendHistory(history: readonly StatusEntry[], entry: StatusEntry): StatusEntry[] {
  return mergeHistory(history, [entry]);
}
