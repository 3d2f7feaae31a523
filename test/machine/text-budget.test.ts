/**
 * Cutting text to a byte budget (src/machine/text-budget.ts) gives exactly what the two
 * definitions it replaced gave: the fetcher's `truncateUtf8` (UTF-8 bytes through Buffer) and
 * the history's `keepStart`/`keepEnd` (bytes inside a JSON string). Both are kept here, as they
 * were, as the oracles.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { cutToBytes } from "../../src/machine/text-budget.ts";

/** src/fetcher/report.ts before the move. */
function truncateUtf8(text: string, max: number, fromEnd = false): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= max) return text;
  let cut = fromEnd ? bytes.subarray(bytes.length - max) : bytes.subarray(0, max);
  if (fromEnd) {
    let i = 0;
    while (i < cut.length && ((cut[i] as number) & 0xc0) === 0x80) i++;
    cut = cut.subarray(i);
  } else {
    let end = cut.length;
    let back = 0;
    while (back < 4 && end - back - 1 >= 0 && ((cut[end - back - 1] as number) & 0xc0) === 0x80) back++;
    const lead = cut[end - back - 1];
    if (lead !== undefined && lead >= 0xc0) {
      const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
      if (back + 1 < need) end = end - back - 1;
    }
    cut = cut.subarray(0, end);
  }
  return cut.toString("utf8");
}

/** src/service/machine-store.ts before the move. */
const encodedBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value));

function keepEnd(text: string, budget: number): string {
  let used = 0;
  let start = text.length;
  while (start > 0) {
    const low = text.charCodeAt(start - 1);
    const high = start > 1 ? text.charCodeAt(start - 2) : 0;
    const width = low >= 0xdc00 && low <= 0xdfff && high >= 0xd800 && high <= 0xdbff ? 2 : 1;
    const cost = encodedBytes(text.slice(start - width, start)) - 2;
    if (used + cost > budget) break;
    used += cost;
    start -= width;
  }
  return text.slice(start);
}

function keepStart(text: string, budget: number): string {
  let used = 0;
  let end = 0;
  while (end < text.length) {
    const high = text.charCodeAt(end);
    const low = text.charCodeAt(end + 1);
    const width = high >= 0xd800 && high <= 0xdbff && low >= 0xdc00 && low <= 0xdfff ? 2 : 1;
    const cost = encodedBytes(text.slice(end, end + width)) - 2;
    if (used + cost > budget) break;
    used += cost;
    end += width;
  }
  return text.slice(0, end);
}

/**
 * Texts with the characters a cut can go wrong on: quotes and backslashes, control characters
 * (short and `\u00XX` escapes), two- and three-byte characters, surrogate pairs, and lone
 * surrogates of either half.
 */
const tricky = fc.constantFrom(
  '"',
  "\\",
  "\n",
  "\t",
  "\u0000",
  "\u001f",
  "\u007f",
  "é",
  "€",
  "\u2028",
  "😀",
  "\u{10ffff}",
  "\ud800",
  "\udc00",
  "\udbff",
);
const text = fc
  .array(fc.oneof(fc.string({ unit: "binary" }), tricky, fc.string({ unit: "grapheme-ascii" })), {
    maxLength: 12,
  })
  .map((parts) => parts.join(""));
const budget = fc.nat({ max: 80 });

test("utf8, start and end: as the fetcher's truncateUtf8", () => {
  fc.assert(
    fc.property(text, budget, (t, max) => {
      assert.equal(cutToBytes(t, max, { measure: "utf8", keep: "start" }), truncateUtf8(t, max));
      assert.equal(cutToBytes(t, max, { measure: "utf8", keep: "end" }), truncateUtf8(t, max, true));
    }),
    { numRuns: 5000 },
  );
});

test("json, start and end: as the history's keepStart and keepEnd", () => {
  fc.assert(
    fc.property(text, budget, (t, max) => {
      assert.equal(cutToBytes(t, max, { measure: "json", keep: "start" }), keepStart(t, max));
      assert.equal(cutToBytes(t, max, { measure: "json", keep: "end" }), keepEnd(t, max));
    }),
    { numRuns: 5000 },
  );
});

test("every code unit alone and beside a surrogate, at every budget up to 8", () => {
  for (let unit = 0; unit <= 0xffff; unit++) {
    const c = String.fromCharCode(unit);
    for (const t of [c, `${c}\udc00`, `\ud800${c}`, `a${c}b`]) {
      for (let max = 0; max <= 8; max++) {
        assert.equal(cutToBytes(t, max, { measure: "utf8", keep: "start" }), truncateUtf8(t, max));
        assert.equal(cutToBytes(t, max, { measure: "utf8", keep: "end" }), truncateUtf8(t, max, true));
        assert.equal(cutToBytes(t, max, { measure: "json", keep: "start" }), keepStart(t, max));
        assert.equal(cutToBytes(t, max, { measure: "json", keep: "end" }), keepEnd(t, max));
      }
    }
  }
});
