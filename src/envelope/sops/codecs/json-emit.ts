/**
 * JSON output byte for byte as sops 3.13.2 writes it (stores/json/store.go): the tree is
 * encoded compactly with Go's encoding/json rules for scalars and keys, then re-indented with
 * json.Indent. Writing the indented form directly gives the same bytes:
 * - one member or element per line, `": "` after keys, `{}` and `[]` for empty containers
 *   (also for containers holding only comments, which JSON cannot carry and sops drops);
 * - strings escaped like Go's json.Marshal with HTML escaping on (see escapeJsonString);
 * - floats like Go's float64 encoder, ints in decimal, null/true/false as literals.
 */
import { BootsealError } from "../../../errors.ts";
import type { Mapping, Scalar, Sequence, Value } from "../document.ts";
import { decodeUtf8GoRuns } from "./go-utf8.ts";
import { CappedText } from "./output.ts";

/**
 * Go writes `\b \f \n \r \t \" \\` short (\b and \f since Go 1.22, checked against sops
 * 3.13.2), other C0 controls as `\u00XX` (lower-case hex), and always escapes `<`, `>`, `&`
 * (json.Marshal's HTML safety) and U+2028/U+2029 (JSONP safety). DEL and everything else
 * are written raw.
 */
const NEEDS_ESCAPE = /[\u0000-\u001f"\\<>&\u2028\u2029]/g;

const SHORT: Readonly<Record<string, string>> = {
  '"': '\\"',
  "\\": "\\\\",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
};

function escapeChar(ch: string): string {
  return SHORT[ch] ?? `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

/**
 * Printable ASCII other than `"`, `\\`, `<`, `>`, `&`: nothing to escape. An anchored class
 * test is five times faster than the replace scan on a long value (a 16 KiB payload's ENC[]
 * was 5 % of a publish's CPU).
 */
const NOTHING_TO_ESCAPE = /^[\x20\x21\x23-\x25\x27-\x3b\x3d\x3f-\x5b\x5d-\x7f]*$/;

/** The body of a Go JSON string literal for `text`, without the quotes. */
function escapeText(text: string): string {
  return NOTHING_TO_ESCAPE.test(text) ? text : text.replace(NEEDS_ESCAPE, escapeChar);
}

/**
 * A JSON string literal as Go writes it. Bytes (binary plaintext, or a decrypted value that
 * is not UTF-8) go through Go's UTF-8 walk: each invalid byte is written as the escape
 * `\ufffd`, which is what json.Marshal does with a Go string holding invalid UTF-8.
 */
export function escapeJsonString(value: string | Uint8Array): string {
  if (typeof value === "string") return `"${escapeText(value)}"`;
  const body = decodeUtf8GoRuns(value)
    .map((run) => (run === null ? "\\ufffd" : escapeText(run)))
    .join("");
  return `"${body}"`;
}

/** Go's json.UnsupportedValueError text for a non-finite float: `json: unsupported value: +Inf`. */
export function unsupportedJsonValue(value: number): string {
  const name = Number.isNaN(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";
  return `json: unsupported value: ${name}`;
}

/**
 * Go's float64 JSON form: shortest round-trip digits, fixed notation for 1e-6 <= |x| < 1e21,
 * exponent notation otherwise with the exponent unpadded (`1e-7`, `1e+21`). This is
 * ECMAScript's Number-to-String, except that Go keeps the sign of negative zero.
 */
export function formatGoFloat(value: number): string {
  if (!Number.isFinite(value)) {
    // Go's json.Marshal refuses these, so sops cannot write them (its words, exit 4).
    throw new BootsealError(
      "UNREPRESENTABLE",
      `Error marshaling to json: Error encoding value : ${unsupportedJsonValue(value)}`,
    );
  }
  if (Object.is(value, -0)) return "-0";
  return String(value);
}

function emitScalar(s: Scalar): string {
  switch (s.type) {
    case "str":
      return escapeJsonString(s.value);
    case "bytes":
      // A decrypted `type:bytes` value is a Go []byte, which json.Marshal writes as base64.
      return `"${Buffer.from(s.value).toString("base64")}"`;
    case "time":
      // Only YAML produces timestamps; JSON output carries their text (Go's MarshalText).
      return escapeJsonString(s.value);
    case "int":
      return s.value.toString();
    case "float":
      return formatGoFloat(s.value);
    case "bool":
      return s.value ? "true" : "false";
    case "null":
      return "null";
  }
}

/** Indentation unit: a tab by default, as sops' `stores.json.indent` -1. */
export type JsonIndent = number | "\t" | undefined;

export function indentUnit(indent: JsonIndent): string {
  if (indent === undefined || indent === "\t" || indent === -1) return "\t";
  if (!Number.isInteger(indent) || indent < -1) {
    // sops: "JSON Indentation parameter smaller than -1 is not accepted"
    throw new BootsealError("USAGE", "json: indent must be a number of spaces (0 or more)");
  }
  return " ".repeat(indent);
}

/**
 * Serialize a value at nesting `depth` into `out`. Iterative callers would be faster on
 * very deep trees; the parser caps depth (MAX_JSON_DEPTH), so recursion is bounded there.
 */
function emitValue(v: Value, unit: string, depth: number, out: CappedText): void {
  if (v.kind === "scalar") {
    out.push(emitScalar(v));
    return;
  }
  if (v.kind === "map") {
    emitMapping(v, unit, depth, out);
    return;
  }
  emitSequence(v, unit, depth, out);
}

function emitMapping(m: Mapping, unit: string, depth: number, out: CappedText): void {
  const inner = `\n${unit.repeat(depth + 1)}`;
  let first = true;
  for (const item of m.items) {
    if (item.kind !== "entry") continue; // JSON has no comments; sops skips them
    out.push(first ? `{${inner}` : `,${inner}`);
    first = false;
    out.push(escapeJsonString(item.key), ": ");
    emitValue(item.value, unit, depth + 1, out);
  }
  out.push(first ? "{}" : `\n${unit.repeat(depth)}}`);
}

function emitSequence(s: Sequence, unit: string, depth: number, out: CappedText): void {
  const inner = `\n${unit.repeat(depth + 1)}`;
  let first = true;
  for (const item of s.items) {
    if (item.kind === "comment") continue;
    out.push(first ? `[${inner}` : `,${inner}`);
    first = false;
    emitValue(item, unit, depth + 1, out);
  }
  out.push(first ? "[]" : `\n${unit.repeat(depth)}]`);
}

/** A whole document: the top-level object plus the trailing newline sops adds (3.10+). */
export function emitJsonDocument(doc: Mapping, indent?: JsonIndent): string {
  const out = new CappedText("json");
  emitMapping(doc, indentUnit(indent), 0, out);
  out.push("\n");
  return out.join();
}
