/**
 * A fast path for the plainest YAML, the shape sops itself writes: block mappings and
 * sequences indented with spaces, one `key: value` or `- value` per line, plain scalars,
 * quoted strings without escapes, and `|` / `|-` literal blocks (the armoured keys in the
 * metadata). No comments, anchors, tags, flow collections, blank lines, tabs, CRs, non-ASCII
 * text or multi-line plain scalars.
 *
 * It returns null for anything outside that subset, and the general parser (./yaml-parse.ts,
 * over the `yaml` package) reads the text instead; inside the subset it builds exactly the tree
 * the general parser builds (same scalar resolution, ./yaml-scalar.ts). The general parser
 * costs most of the time of decrypting a large document; a line scan costs little.
 */
import { MAX_NESTING_DEPTH } from "../../../limits.ts";
import type { Branch, Entry, Mapping, Scalar, Sequence, Value } from "../document.ts";
import { resolvePlain } from "./yaml-scalar.ts";

/** Anything that needs the general parser: comments, tabs, CRs, non-ASCII, backslashes, trailing spaces. */
const OUTSIDE = /[^\n\x20-\x7e]|[#\\]| \n/;
/** An implicit key we accept: YAML limits those to 1024 characters. */
const KEY = /^[A-Za-z0-9_][A-Za-z0-9_./-]{0,1000}$/;
/** A plain scalar's first character must not be a YAML indicator (or a space). */
const PLAIN_FIRST = /^[A-Za-z0-9_./=+~$^(]|^-[A-Za-z0-9.]/;
const DOUBLE_QUOTED = /^"[^"]*"$/;
const SINGLE_QUOTED = /^'[^']*'$/;

/** Thrown inside the scan when the text leaves the subset; never escapes this module. */
class Outside extends Error {}

const outside = (): never => {
  throw new Outside();
};

interface Line {
  readonly indent: number;
  /** The text after the indentation. */
  readonly body: string;
}

class Scanner {
  at = 0;
  readonly lines: readonly Line[];
  constructor(lines: readonly Line[]) {
    this.lines = lines;
  }

  peek(): Line | undefined {
    return this.lines[this.at];
  }
}

function indentOf(line: string): number {
  let i = 0;
  while (line.charCodeAt(i) === 0x20) i++;
  return i;
}

/** A scalar written on the line itself: plain, "double" or 'single' quoted. */
function inlineScalar(text: string): Scalar {
  const first = text.charCodeAt(0);
  if (first === 0x22 /* " */) {
    if (!DOUBLE_QUOTED.test(text)) outside();
    return { kind: "scalar", type: "str", value: text.slice(1, -1) };
  }
  if (first === 0x27 /* ' */) {
    if (!SINGLE_QUOTED.test(text)) outside();
    return { kind: "scalar", type: "str", value: text.slice(1, -1) };
  }
  if (!PLAIN_FIRST.test(text)) outside();
  // `: ` or a final `:` would make it a mapping; a final space belongs to no scalar.
  if (text.includes(": ") || text.endsWith(":") || text.endsWith(" ")) outside();
  const r = resolvePlain(text);
  if (r.type === "uint") outside(); // an error for the general parser to report
  return r as Scalar;
}

/**
 * `|` or `|-` with the following lines: content lines are indented deeper than `parent`
 * and at least as deep as the first one; clip keeps one final newline, strip none.
 */
function literalBlock(s: Scanner, header: string, parent: number): Scalar {
  if (header !== "|" && header !== "|-") outside();
  const first = s.peek();
  if (first === undefined || first.indent <= parent) outside();
  const indent = (first as Line).indent;
  const parts: string[] = [];
  for (let line = s.peek(); line !== undefined && line.indent >= indent; line = s.peek()) {
    parts.push(" ".repeat(line.indent - indent) + line.body);
    s.at++;
  }
  const text = parts.join("\n");
  return { kind: "scalar", type: "str", value: header === "|" ? `${text}\n` : text };
}

/**
 * The value after `key:` (inMap) or `- ` on a line at `indent`, with any block below it.
 * Literal blocks are taken as mapping values only.
 */
function valueAfter(s: Scanner, rest: string, indent: number, inMap: boolean): Value {
  if (rest === "") {
    const next = s.peek();
    if (next === undefined || next.indent < indent) return { kind: "scalar", type: "null" };
    // `key:` then `- item` at the same column is a sequence in YAML: left to the general parser.
    if (next.indent === indent) {
      if (next.body.startsWith("-")) outside();
      return { kind: "scalar", type: "null" };
    }
    return block(s, next.indent);
  }
  if (rest.charCodeAt(0) === 0x7c /* | */) return inMap ? literalBlock(s, rest, indent) : outside();
  const value = inlineScalar(rest);
  const next = s.peek();
  // A deeper line would continue a multi-line plain scalar.
  if (next !== undefined && next.indent > indent) outside();
  return value;
}

/** A mapping or sequence whose items start at column `indent`. */
function block(s: Scanner, indent: number): Mapping | Sequence {
  const line = s.peek() as Line;
  return line.body === "-" || line.body.startsWith("- ") ? sequence(s, indent) : mapping(s, indent, "");
}

/** `key: …` lines at `indent`. `first`: the first entry's text when it follows a `- `. */
function mapping(s: Scanner, indent: number, first: string): Mapping {
  const items: Entry[] = [];
  const seen = new Set<string>();
  let body = first;
  if (first === "") {
    body = (s.peek() as Line).body;
    s.at++;
  }
  for (;;) {
    const colon = body.indexOf(":");
    if (colon <= 0) outside();
    const key = body.slice(0, colon);
    if (!KEY.test(key) || resolvePlain(key).type !== "str" || seen.has(key)) outside();
    seen.add(key);
    const after = body.slice(colon + 1);
    if (after !== "" && (after.charCodeAt(0) !== 0x20 || after.charCodeAt(1) === 0x20)) outside();
    items.push({ kind: "entry", key, value: valueAfter(s, after.slice(1), indent, true) });
    const next = s.peek();
    if (next === undefined || next.indent < indent) return { kind: "map", items };
    if (next.indent > indent || next.body.startsWith("-")) outside();
    body = next.body;
    s.at++;
  }
}

/** `- …` lines at `indent`. */
function sequence(s: Scanner, indent: number): Sequence {
  const items: Value[] = [];
  for (;;) {
    const line = s.peek() as Line;
    s.at++;
    if (line.body === "-") {
      items.push(valueAfter(s, "", indent, false));
    } else {
      const rest = line.body.slice(2);
      const c = rest.charCodeAt(0);
      // `- - x` (a nested sequence) fails PLAIN_FIRST below; `- -1.5` is a plain scalar.
      if (rest === "" || c === 0x20) outside();
      // `- key: value` opens a mapping whose keys sit two columns right of the dash.
      const colon = rest.indexOf(":");
      const isEntry = colon > 0 && (colon === rest.length - 1 || rest.charCodeAt(colon + 1) === 0x20);
      if (isEntry && c !== 0x22 && c !== 0x27) items.push(mapping(s, indent + 2, rest));
      else items.push(valueAfter(s, rest, indent, false));
    }
    const next = s.peek();
    if (next === undefined || next.indent < indent) return { kind: "seq", items };
    if (next.indent > indent || !(next.body === "-" || next.body.startsWith("- "))) outside();
  }
}

/** The branches of `text` when it is inside the subset described above; otherwise null. */
export function parseSimpleYaml(text: string): Branch[] | null {
  if (!text.endsWith("\n") || OUTSIDE.test(text)) return null;
  const raw = text.split("\n");
  raw.pop(); // after the final newline
  const lines: Line[] = new Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const line = raw[i] as string;
    const indent = indentOf(line);
    // Blank lines and markers (`---`, `...`, `%`) are left to the general parser, and so is
    // deep indentation: every level indents at least one column, so this keeps the recursion
    // below MAX_NESTING_DEPTH levels and leaves the depth check (and its error) to the parser.
    if (indent === line.length || indent >= MAX_NESTING_DEPTH) return null;
    lines[i] = { indent, body: indent === 0 ? line : line.slice(indent) };
  }
  const s = new Scanner(lines);
  const top = s.peek();
  if (top === undefined || top.indent !== 0 || top.body.startsWith("-")) return null;
  try {
    const branch = mapping(s, 0, "");
    return s.at === lines.length ? [branch] : null;
  } catch (err) {
    if (err instanceof Outside) return null;
    throw err;
  }
}
