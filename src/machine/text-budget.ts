/**
 * Cutting a text to a byte budget, whole characters only: the fetcher cuts a report's message
 * and output to the protocol's limits in UTF-8 bytes, and the service cuts a stored history
 * entry's message and output in the bytes they take inside a JSON string. Pure, with no Node
 * API: the walk is over UTF-16 code units, a surrogate pair counting as one character.
 */

/**
 * How a character's bytes are counted:
 * - `utf8`: as UTF-8. A lone surrogate counts as the U+FFFD it is encoded as, and a cut text
 *   carries that U+FFFD, as bytes decoded again would.
 * - `json`: inside a JSON string, without the quotes (`JSON.stringify`'s escapes: `\"`, `\n`,
 *   `\u001f`, `\ud800` for a lone surrogate), then as UTF-8.
 */
export type ByteMeasure = "utf8" | "json";

export interface TextBudget {
  readonly measure: ByteMeasure;
  /** Which end of the text is kept: its start (a message) or its end (a command's output). */
  readonly keep: "start" | "end";
}

/** JSON's two-character escapes of control characters; any other one is `\u00XX`. */
const SHORT_ESCAPES: ReadonlySet<number> = new Set([0x08, 0x09, 0x0a, 0x0c, 0x0d]);

const isHigh = (unit: number) => unit >= 0xd800 && unit <= 0xdbff;
const isLow = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff;

/** Bytes of one character that is a single code unit (not half of a pair). */
function unitBytes(unit: number, measure: ByteMeasure): number {
  if (measure === "json") {
    if (unit === 0x22 || unit === 0x5c) return 2;
    if (unit < 0x20) return SHORT_ESCAPES.has(unit) ? 2 : 6;
    if (isHigh(unit) || isLow(unit)) return 6;
  }
  return unit < 0x80 ? 1 : unit < 0x800 ? 2 : 3;
}

/** A surrogate pair is four bytes in UTF-8, in JSON as well. */
const PAIR_BYTES = 4;

/**
 * The start or end of `text` (per `budget.keep`) that takes at most `maxBytes` bytes as
 * `budget.measure` counts them, cut on a character boundary; the text itself when it fits.
 */
export function cutToBytes(text: string, maxBytes: number, budget: TextBudget): string {
  const fromEnd = budget.keep === "end";
  let used = 0;
  let at = fromEnd ? text.length : 0;
  while (fromEnd ? at > 0 : at < text.length) {
    const unit = text.charCodeAt(fromEnd ? at - 1 : at);
    const other = fromEnd ? text.charCodeAt(at - 2) : text.charCodeAt(at + 1);
    const pair = fromEnd ? isLow(unit) && isHigh(other) : isHigh(unit) && isLow(other);
    const cost = pair ? PAIR_BYTES : unitBytes(unit, budget.measure);
    if (used + cost > maxBytes) break;
    used += cost;
    at += (fromEnd ? -1 : 1) * (pair ? 2 : 1);
  }
  const kept = fromEnd ? text.slice(at) : text.slice(0, at);
  if (budget.measure === "utf8" && kept.length < text.length) return kept.replace(/\p{Cs}/gu, "\uFFFD");
  return kept;
}
