/**
 * A lossless JSON reader for SOPS documents. `JSON.parse` cannot be used: it reorders
 * integer-like keys, drops duplicate keys and rounds integers beyond 2^53, and each of those
 * changes the walk order or the plaintexts, hence the MAC (docs/sops-format.md section 7.2).
 *
 * It reads the bytes the way sops 3.13.2 does with Go's encoding/json (UseNumber):
 * - numbers: a literal Go's ParseInt accepts (no fraction or exponent, within int64) is an
 *   `int`; any other a `float`; a float literal beyond float64 range is an error;
 * - strings: full escape handling; a lone or mismatched surrogate escape becomes U+FFFD;
 *   raw bytes that are not valid UTF-8 become U+FFFD one byte at a time (./go-utf8.ts);
 * - a UTF-8 byte order mark is an error, as in Go.
 * It is stricter than sops in two ways: trailing content after the top-level object and an
 * unterminated document are errors (sops ignores the former and may accept the latter).
 */
import { BootsealError } from "../../../errors.ts";
import { MAX_NESTING_DEPTH } from "../../../limits.ts";
import type { Entry, Mapping, Sequence, Value } from "../document.ts";
import { decodeUtf8Go } from "./go-utf8.ts";

/** Deeper nesting than this is refused, so hostile input cannot exhaust the stack. */
export const MAX_JSON_DEPTH = MAX_NESTING_DEPTH;

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

interface Cursor {
  readonly bytes: Uint8Array;
  pos: number;
}

/** 1-based line and column (in bytes) of a byte offset, computed only when failing. */
function lineColumn(bytes: Uint8Array, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < bytes.length; i++) {
    if (bytes[i] === 0x0a) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

/** Never echoes input: a message names the problem and the place only. */
function fail(c: Cursor, what: string, offset = c.pos): never {
  const { line, column } = lineColumn(c.bytes, offset);
  return failAt(what, line, column);
}

function failAt(what: string, line: number, column: number): never {
  throw new BootsealError("BAD_INPUT", `json: ${what} at line ${line}, column ${column}`);
}

function skipWhitespace(c: Cursor): void {
  const { bytes } = c;
  while (c.pos < bytes.length) {
    const b = bytes[c.pos];
    if (b !== 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0d) return;
    c.pos++;
  }
}

/** Parse a whole document; its top level must be an object (sops refuses anything else). */
export function parseJsonDocument(bytes: Uint8Array): Mapping {
  const c: Cursor = { bytes, pos: 0 };
  skipWhitespace(c);
  if (c.pos >= bytes.length) fail(c, "empty document");
  if (bytes[c.pos] !== 0x7b) fail(c, "top level must be an object");
  const doc = parseObject(c, 1);
  skipWhitespace(c);
  if (c.pos < bytes.length) fail(c, "unexpected content after the top-level object");
  return doc;
}

function parseValue(c: Cursor, depth: number): Value {
  skipWhitespace(c);
  const b = c.bytes[c.pos];
  switch (b) {
    case undefined:
      return fail(c, "unexpected end of input");
    case 0x7b:
      return parseObject(c, depth + 1);
    case 0x5b:
      return parseArray(c, depth + 1);
    case QUOTE:
      return { kind: "scalar", type: "str", value: parseString(c) };
    case 0x74:
      expectWord(c, "true");
      return { kind: "scalar", type: "bool", value: true };
    case 0x66:
      expectWord(c, "false");
      return { kind: "scalar", type: "bool", value: false };
    case 0x6e:
      expectWord(c, "null");
      return { kind: "scalar", type: "null" };
    default:
      if (b === 0x2d || (b >= 0x30 && b <= 0x39)) return parseNumber(c);
      return fail(c, "unexpected character");
  }
}

function expectWord(c: Cursor, word: string): void {
  for (let k = 0; k < word.length; k++) {
    if (c.bytes[c.pos + k] !== word.charCodeAt(k)) fail(c, "invalid literal", c.pos + k);
  }
  c.pos += word.length;
}

function parseObject(c: Cursor, depth: number): Mapping {
  if (depth > MAX_JSON_DEPTH) fail(c, "nesting too deep");
  c.pos++; // '{'
  const items: Entry[] = [];
  skipWhitespace(c);
  if (c.bytes[c.pos] === 0x7d) {
    c.pos++;
    return { kind: "map", items };
  }
  for (;;) {
    skipWhitespace(c);
    if (c.bytes[c.pos] !== QUOTE) fail(c, c.pos >= c.bytes.length ? "unterminated object" : "expected a key");
    const key = parseString(c);
    skipWhitespace(c);
    if (c.bytes[c.pos] !== 0x3a) fail(c, "expected ':' after a key");
    c.pos++;
    items.push({ kind: "entry", key, value: parseValue(c, depth) });
    skipWhitespace(c);
    const b = c.bytes[c.pos];
    c.pos++;
    if (b === 0x7d) return { kind: "map", items };
    if (b !== 0x2c) fail(c, b === undefined ? "unterminated object" : "expected ',' or '}'", c.pos - 1);
  }
}

function parseArray(c: Cursor, depth: number): Sequence {
  if (depth > MAX_JSON_DEPTH) fail(c, "nesting too deep");
  c.pos++; // '['
  const items: Value[] = [];
  skipWhitespace(c);
  if (c.bytes[c.pos] === 0x5d) {
    c.pos++;
    return { kind: "seq", items };
  }
  for (;;) {
    items.push(parseValue(c, depth));
    skipWhitespace(c);
    const b = c.bytes[c.pos];
    c.pos++;
    if (b === 0x5d) return { kind: "seq", items };
    if (b !== 0x2c) fail(c, b === undefined ? "unterminated array" : "expected ',' or ']'", c.pos - 1);
  }
}

function isDigit(b: number | undefined): boolean {
  return b !== undefined && b >= 0x30 && b <= 0x39;
}

/** RFC 8259 number grammar, then Go's int-or-float decision (sops 3.13.2 normalizeJSONNumber). */
function parseNumber(c: Cursor): Value {
  const { bytes } = c;
  const start = c.pos;
  let integral = true;
  if (bytes[c.pos] === 0x2d) c.pos++;
  if (bytes[c.pos] === 0x30) {
    c.pos++;
  } else if (isDigit(bytes[c.pos])) {
    while (isDigit(bytes[c.pos])) c.pos++;
  } else {
    fail(c, "invalid number");
  }
  if (bytes[c.pos] === 0x2e) {
    integral = false;
    c.pos++;
    if (!isDigit(bytes[c.pos])) fail(c, "invalid number");
    while (isDigit(bytes[c.pos])) c.pos++;
  }
  if (bytes[c.pos] === 0x65 || bytes[c.pos] === 0x45) {
    integral = false;
    c.pos++;
    if (bytes[c.pos] === 0x2b || bytes[c.pos] === 0x2d) c.pos++;
    if (!isDigit(bytes[c.pos])) fail(c, "invalid number");
    while (isDigit(bytes[c.pos])) c.pos++;
  }
  // The literal is ASCII by construction.
  const text = decodeUtf8Go(bytes, start, c.pos);
  // 20 characters hold every int64 ("-9223372036854775808"); longer is a float in Go too.
  if (integral && text.length <= 20) {
    const n = BigInt(text);
    if (n >= INT64_MIN && n <= INT64_MAX) return { kind: "scalar", type: "int", value: n };
  }
  const f = Number(text);
  // Go's ParseFloat refuses overflow (sops: "value out of range"); underflow to 0 is fine.
  if (!Number.isFinite(f)) fail(c, "number out of range", start);
  return { kind: "scalar", type: "float", value: f };
}

function hex4(c: Cursor, at: number): number {
  let v = 0;
  for (let k = 0; k < 4; k++) {
    const b = c.bytes[at + k];
    let d: number;
    if (b === undefined) return -1;
    if (b >= 0x30 && b <= 0x39) d = b - 0x30;
    else if (b >= 0x61 && b <= 0x66) d = b - 0x57;
    else if (b >= 0x41 && b <= 0x46) d = b - 0x37;
    else return -1;
    v = v * 16 + d;
  }
  return v;
}

const SHORT_ESCAPES: ReadonlyMap<number, string> = new Map([
  [0x22, '"'],
  [0x5c, "\\"],
  [0x2f, "/"],
  [0x62, "\b"],
  [0x66, "\f"],
  [0x6e, "\n"],
  [0x72, "\r"],
  [0x74, "\t"],
]);

/** A string literal at c.pos (on the opening quote). */
function parseString(c: Cursor): string {
  const { bytes } = c;
  c.pos++; // opening quote
  const parts: string[] = [];
  let runStart = c.pos;
  for (;;) {
    const b = bytes[c.pos];
    if (b === undefined) fail(c, "unterminated string");
    if (b === QUOTE) {
      if (c.pos > runStart) parts.push(decodeUtf8Go(bytes, runStart, c.pos));
      c.pos++;
      return parts.join("");
    }
    if (b < 0x20) fail(c, "control character in string");
    if (b !== BACKSLASH) {
      c.pos++;
      continue;
    }
    if (c.pos > runStart) parts.push(decodeUtf8Go(bytes, runStart, c.pos));
    parts.push(parseEscape(c));
    runStart = c.pos;
  }
}

/** One escape at c.pos (on the backslash); Go's rules for surrogates (encoding/json unquote). */
function parseEscape(c: Cursor): string {
  const e = c.bytes[c.pos + 1];
  const short = e === undefined ? undefined : SHORT_ESCAPES.get(e);
  if (short !== undefined) {
    c.pos += 2;
    return short;
  }
  if (e !== 0x75) fail(c, "invalid escape in string", c.pos + 1);
  const unit = hex4(c, c.pos + 2);
  if (unit < 0) fail(c, "invalid \\u escape in string", c.pos);
  c.pos += 6;
  if (unit < 0xd800 || unit >= 0xe000) return String.fromCharCode(unit);
  // A high surrogate pairs only with an immediately following low-surrogate escape; anything
  // else is U+FFFD and the following escape (if any) is read on its own.
  if (unit < 0xdc00 && c.bytes[c.pos] === BACKSLASH && c.bytes[c.pos + 1] === 0x75) {
    const low = hex4(c, c.pos + 2);
    if (low >= 0xdc00 && low < 0xe000) {
      c.pos += 6;
      return String.fromCharCode(unit, low);
    }
  }
  return "\ufffd";
}
