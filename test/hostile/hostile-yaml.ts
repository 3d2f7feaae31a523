/**
 * Hostile YAML for the hostile-input suites: the "billion laughs" family (nested aliases in
 * flow and block sequences, mappings and merge keys, several widths and depths) and deep
 * nesting in every YAML and JSON collection style. Each generator is small input that would
 * expand to (width ** levels) nodes, or nest far deeper than any walker's stack allows.
 */
import assert from "node:assert/strict";
import { BootsealError, type ErrorCode } from "../../src/errors.ts";

const name = (level: number): string => `l${level}`;

export interface Bomb {
  readonly label: string;
  readonly text: string;
}

/** `l0: &l0 ["lol", …]`, then each level a flow sequence of `width` aliases of the one before. */
export function flowSeqBomb(levels: number, width: number): string {
  let text = `${name(0)}: &${name(0)} [${Array(width).fill('"lol"').join(",")}]\n`;
  for (let i = 1; i < levels; i++) {
    text += `${name(i)}: &${name(i)} [${Array(width)
      .fill(`*${name(i - 1)}`)
      .join(",")}]\n`;
  }
  return text;
}

/** The same shape with block sequences (`- *l0` lines). */
export function blockSeqBomb(levels: number, width: number): string {
  let text = `${name(0)}: &${name(0)}\n${"  - lol\n".repeat(width)}`;
  for (let i = 1; i < levels; i++)
    text += `${name(i)}: &${name(i)}\n${`  - *${name(i - 1)}\n`.repeat(width)}`;
  return text;
}

/** Block mappings: `k0: *l0`, `k1: *l0`, … */
export function mapBomb(levels: number, width: number): string {
  const keys = (value: string) => Array.from({ length: width }, (_, k) => `  k${k}: ${value}\n`).join("");
  let text = `${name(0)}: &${name(0)}\n${keys("lol")}`;
  for (let i = 1; i < levels; i++) text += `${name(i)}: &${name(i)}\n${keys(`*${name(i - 1)}`)}`;
  return text;
}

/** Merge keys: each level's entries are flow mappings `{<<: *prev}`. */
export function mergeBomb(levels: number, width: number): string {
  const keys = (value: string) => Array.from({ length: width }, (_, k) => `  k${k}: ${value}\n`).join("");
  let text = `${name(0)}: &${name(0)}\n${keys("lol")}`;
  for (let i = 1; i < levels; i++) text += `${name(i)}: &${name(i)}\n${keys(`{<<: *${name(i - 1)}}`)}`;
  return text;
}

/** The family, with the issue's reproducer (7 levels of 9) and the 6-level one that was stored. */
export function bombs(): Bomb[] {
  const out: Bomb[] = [];
  const shapes: [string, (l: number, w: number) => string][] = [
    ["flow sequences", flowSeqBomb],
    ["block sequences", blockSeqBomb],
    ["mappings", mapBomb],
    ["merge keys", mergeBomb],
  ];
  for (const [shape, make] of shapes) {
    for (const [levels, width] of [
      [5, 9],
      [6, 9],
      [7, 9],
      [4, 40],
      [12, 4],
      [24, 2],
    ] as const) {
      out.push({ label: `${shape}, ${levels} levels of ${width}`, text: make(levels, width) });
    }
  }
  return out;
}

/** A document whose nesting is `depth` collections below the top-level mapping. */
export function deepDocuments(depth: number): Bomb[] {
  return [
    { label: "flow sequences", text: `a: ${"[".repeat(depth)}${"]".repeat(depth)}\n` },
    { label: "flow mappings", text: `a: ${"{a: ".repeat(depth)}1${"}".repeat(depth)}\n` },
    { label: "compact block sequences", text: `a:\n${"- ".repeat(depth)}x\n` },
    { label: "explicit keys", text: `${"? ".repeat(depth)}x\n` },
    { label: "mixed flow", text: `a: ${"[{a: ".repeat(depth)}1${"}]".repeat(depth)}\n` },
  ];
}

/** JSON nested `depth` levels below the top-level object. */
export function deepJson(depth: number): Bomb[] {
  return [
    { label: "arrays", text: `{"a": ${"[".repeat(depth)}${"]".repeat(depth)}}` },
    { label: "objects", text: `{"a": ${'{"a": '.repeat(depth)}1${"}".repeat(depth)}}` },
  ];
}

/** No message, on any channel, may show a stack trace or echo the document. */
export function assertCleanMessage(text: string, assert: (ok: boolean, message: string) => void): void {
  assert(!/\n\s+at /.test(text), `no stack trace: ${text.slice(0, 400)}`);
  assert(!text.includes("lol"), `no document content: ${text.slice(0, 400)}`);
  assert(!/RangeError|Maximum call stack|Invalid string length|heap/i.test(text), text.slice(0, 400));
}

/** `fn` throws a one-line BootsealError with `code`, matching `pattern`, that shows nothing it should not. */
export function assertRefused(fn: () => unknown, code: ErrorCode, pattern: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof BootsealError, String(err));
    assert.equal(err.code, code, err.message);
    assert.match(err.message, pattern);
    assert.ok(!err.message.includes("\n"), "one line");
    assertCleanMessage(err.message, (ok, m) => assert.ok(ok, m));
    return true;
  });
}
