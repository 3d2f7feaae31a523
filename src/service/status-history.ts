/**
 * A status record's history, bounded: the last HISTORY_LIMIT entries, at most
 * HISTORY_MAX_BYTES of them, each entry at most HISTORY_ENTRY_MAX_BYTES (issue #10: unbounded
 * entries made a record of megabytes, rewritten on every report).
 */
import { PHASES, type Phase } from "../machine/status-protocol.ts";
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

/** Where a phase goes among entries of the same millisecond: a boot's own order. */
const TIE_RANK = new Map<Phase, number>(PHASES.map((p, i) => [p, i]));

/**
 * The order of a history: by time (ISO-8601 UTC strings sort as their instants), ties by
 * TIE_RANK. A machine reports one phase after the other, so through two replicas two reports
 * can share a millisecond; arrival order would put the one a replica held after the later one
 * the other replica wrote, and make the held one the present phase.
 */
export function compareEntries(
  a: Pick<StatusEntry, "at" | "phase">,
  b: Pick<StatusEntry, "at" | "phase">,
): number {
  if (a.at !== b.at) return a.at < b.at ? -1 : 1;
  return (TIE_RANK.get(a.phase) ?? 0) - (TIE_RANK.get(b.phase) ?? 0);
}

/**
 * Adds entries to a history in time order and bounds it: at most HISTORY_LIMIT entries (the
 * oldest go first) and HISTORY_MAX_BYTES encoded (the oldest machine reports go first, then the
 * oldest publishes). The newest entry and the latest `published` entry always stay, so a
 * chatty machine can neither grow its record without bound nor push its publish out of the
 * history. In compareEntries's order, not arrival order: reports a replica held
 * (status-coalescer.ts) can reach the store after a later one written by another replica.
 */
export function mergeHistory(
  history: readonly StatusEntry[],
  entries: readonly StatusEntry[],
): StatusEntry[] {
  const all = [...history, ...entries.map(boundEntry)];
  // The sort is stable: entries equal by compareEntries keep arrival order.
  if (all.some((e, i) => i > 0 && compareEntries(all[i - 1]!, e) > 0)) all.sort(compareEntries);
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
