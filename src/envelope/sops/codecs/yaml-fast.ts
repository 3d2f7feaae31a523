/**
 * A fast path for the plainest YAML, the shape sops itself writes and most hand-kept files
 * have: block mappings and sequences indented with spaces, one `key: value` or `- value` per
 * line, plain scalars, quoted strings without escapes, `|` / `|-` literal blocks (the armoured
 * keys in the metadata), full-line and trailing `#` comments and blank lines (a document with
 * those has no literal blocks and no empty `-` items). No anchors, tags, flow collections,
 * tabs, CRs, non-ASCII text or multi-line plain scalars.
 *
 * It returns null for anything outside that subset, and the general parser (./yaml-parse.ts,
 * over the `yaml` package) reads the text instead; inside the subset it builds exactly the tree
 * the general parser builds: the same intermediate tree and marks, finished by the same code
 * (./yaml-tree.ts, which places the comments), and the same scalar resolution
 * (./yaml-scalar.ts). The general parser costs most of the time of decrypting a large
 * document, and most of its memory; a line scan costs little.
 */
import { MAX_NESTING_DEPTH } from "../../../limits.ts";
import type { Branch, Scalar } from "../document.ts";
import type { Mark, MarkKind, PColl, RawComment } from "./yaml-comments.ts";
import { resolvePlain } from "./yaml-scalar.ts";
import { finishStream, type PValue } from "./yaml-tree.ts";

/** Anything that needs the general parser: tabs, CRs, non-ASCII, backslashes, trailing spaces. */
const OUTSIDE = /[^\n\x20-\x7e]|\\| \n/;
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
  /** The text after the indentation, without a trailing comment. */
  readonly body: string;
  /** Offset of the line's first character, and its 0-based number. */
  readonly start: number;
  readonly line: number;
  /** A trailing comment was cut off the line. */
  readonly cut: boolean;
}

class Scanner {
  at = 0;
  readonly lines: readonly Line[];
  /** The marks comments are placed by (./yaml-comments.ts); null when there are no comments. */
  readonly marks: Mark[] | null;
  /** The source lines, blank and comment lines included (what a literal block holds). */
  readonly raw: readonly string[];
  constructor(lines: readonly Line[], marks: Mark[] | null, raw: readonly string[]) {
    this.lines = lines;
    this.marks = marks;
    this.raw = raw;
  }

  peek(): Line | undefined {
    return this.lines[this.at];
  }

  /** A mark at column `col` of `line`, as the general parser makes it for the same token. */
  mark(kind: MarkKind, line: Line, col: number, coll: PColl, order: number, stack: readonly PColl[]): void {
    this.marks?.push({ kind, offset: line.start + col, line: line.line, col, coll, order, stack });
  }
}

function indentOf(line: string): number {
  let i = 0;
  while (line.charCodeAt(i) === 0x20) i++;
  return i;
}

const newColl = (kind: "map" | "seq", line: Line, col: number): PColl => ({
  kind,
  col,
  flow: false,
  start: line.start + col,
  end: line.start + col,
  slots: [],
});

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
 * `|` or `|-` after the key on `header`, with the following lines: content lines are indented
 * deeper than `parent` and at least as deep as the first one; clip keeps one final newline,
 * strip none. A blank or `#` line inside a block is content, not a gap: such blocks, and
 * blocks with a comment on their header line or right below them, are left to the general
 * parser (so the block's own marks never decide where a comment goes).
 */
function literalBlock(
  s: Scanner,
  header: Line,
  text: string,
  parent: number,
  coll: PColl,
  order: number,
  stack: readonly PColl[],
): PValue {
  if ((text !== "|" && text !== "|-") || header.cut) outside();
  const first = s.peek();
  if (first === undefined || first.indent <= parent || first.line !== header.line + 1) outside();
  const indent = (first as Line).indent;
  const parts: string[] = [];
  let last = first as Line;
  for (let line = s.peek(); line !== undefined && line.indent >= indent; line = s.peek()) {
    if (line.cut || (line !== first && line.line !== last.line + 1)) outside();
    parts.push(" ".repeat(line.indent - indent) + line.body);
    last = line;
    s.at++;
  }
  const below = s.peek()?.line ?? s.raw.length;
  for (let k = last.line + 1; k < below; k++) if (s.raw[k] !== "") outside();
  s.mark("value", header, header.body.length - text.length + header.indent, coll, order, stack);
  s.mark("value", last, last.indent + last.body.length - 1, coll, order, stack);
  const value = parts.join("\n");
  return {
    kind: "scalar",
    scalar: { kind: "scalar", type: "str", value: text === "|" ? `${value}\n` : value },
  };
}

/**
 * A scalar on the line at `col`, with its end mark; no line deeper than the entries of its
 * collection (at `indent`) may follow it.
 */
function lineScalar(
  s: Scanner,
  text: string,
  line: Line,
  indent: number,
  col: number,
  coll: PColl,
  order: number,
  stack: readonly PColl[],
): PValue {
  const scalar = inlineScalar(text);
  s.mark("value", line, col + text.length - 1, coll, order, stack);
  const next = s.peek();
  // A deeper line would continue a multi-line plain scalar.
  if (next !== undefined && next.indent > indent) outside();
  return { kind: "scalar", scalar };
}

/** The value of a `key:` (or `-`) with nothing after it at `indent`: null, or the block below. */
function blockBelow(s: Scanner, indent: number, stack: readonly PColl[]): PValue {
  const next = s.peek();
  if (next === undefined || next.indent < indent)
    return { kind: "scalar", scalar: { kind: "scalar", type: "null" } };
  // `key:` then `- item` at the same column is a sequence in YAML: left to the general parser.
  if (next.indent === indent) {
    if (next.body.startsWith("-")) outside();
    return { kind: "scalar", scalar: { kind: "scalar", type: "null" } };
  }
  s.at++;
  const coll =
    next.body === "-" || next.body.startsWith("- ")
      ? sequence(s, next.indent, stack, next)
      : mapping(s, next.indent, stack, next);
  return { kind: "coll", coll };
}

/**
 * `key: …` entries at column `indent`, the first on `line` (taken already: a line of its own,
 * or the line of a `- ` whose item this mapping is). `outer`: the open collections around it.
 */
function mapping(s: Scanner, indent: number, outer: readonly PColl[], first: Line): PColl {
  const coll = newColl("map", first, indent);
  const stack = [...outer, coll];
  const seen = new Set<string>();
  for (let line = first; ; ) {
    const body = line.indent === indent ? line.body : line.body.slice(indent - line.indent);
    const colon = body.indexOf(":");
    if (colon <= 0) outside();
    const key = body.slice(0, colon);
    if (!KEY.test(key) || resolvePlain(key).type !== "str" || seen.has(key)) outside();
    seen.add(key);
    const order = line.start + indent;
    s.mark("key", line, indent, coll, order, stack);
    const after = body.slice(colon + 1);
    if (after !== "" && (after.charCodeAt(0) !== 0x20 || after.charCodeAt(1) === 0x20)) outside();
    const rest = after.slice(1);
    let value: PValue;
    if (rest === "") {
      s.mark("sep", line, indent + colon, coll, order, stack);
      value = blockBelow(s, indent, stack);
    } else if (rest.charCodeAt(0) === 0x7c /* | */)
      value = literalBlock(s, line, rest, indent, coll, order, stack);
    else value = lineScalar(s, rest, line, indent, indent + colon + 2, coll, order, stack);
    coll.slots.push({ order, key, value });
    const next = s.peek();
    if (next === undefined || next.indent < indent) return coll;
    if (next.indent > indent || next.body.startsWith("-")) outside();
    line = next;
    s.at++;
  }
}

/** `- …` items at column `indent`, the first on `line` (taken already). */
function sequence(s: Scanner, indent: number, outer: readonly PColl[], first: Line): PColl {
  const coll = newColl("seq", first, indent);
  const stack = [...outer, coll];
  for (let line = first; ; ) {
    const order = line.start + indent;
    let value: PValue;
    if (line.body === "-") {
      value = blockBelow(s, indent, stack);
      // go-yaml gives an empty item no comments of its own (yaml-comments.ts headTarget):
      // with comments about, left to the general parser.
      if (value.kind === "scalar" && s.marks) outside();
      // An item whose value starts on a later line: the general parser's dash mark.
      s.mark("item", line, indent, coll, order, stack);
      s.mark("dash", line, indent + 0.5, coll, order, stack);
    } else {
      s.mark("item", line, indent, coll, order, stack);
      const rest = line.body.slice(2);
      const c = rest.charCodeAt(0);
      // `- - x` (a nested sequence) fails PLAIN_FIRST below; `- -1.5` is a plain scalar.
      if (rest === "" || c === 0x20 || c === 0x7c /* | */) outside();
      // `- key: value` opens a mapping whose keys sit two columns right of the dash.
      const colon = rest.indexOf(":");
      const isEntry = colon > 0 && (colon === rest.length - 1 || rest.charCodeAt(colon + 1) === 0x20);
      if (isEntry && c !== 0x22 && c !== 0x27)
        value = { kind: "coll", coll: mapping(s, indent + 2, stack, line) };
      else value = lineScalar(s, rest, line, indent, indent + 2, coll, order, stack);
    }
    coll.slots.push({ order, value });
    const next = s.peek();
    if (next === undefined || next.indent < indent) return coll;
    if (next.indent > indent || !(next.body === "-" || next.body.startsWith("- "))) outside();
    line = next;
    s.at++;
  }
}

/** The branches of `text` when it is inside the subset described above; otherwise null. */
export function parseSimpleYaml(text: string): Branch[] | null {
  if (!text.endsWith("\n") || OUTSIDE.test(text)) return null;
  const raw = text.split("\n");
  const lineCount = raw.length; // with the empty one after the final newline, as YAML counts
  raw.pop();
  const hasHash = text.includes("#");
  const comments: RawComment[] = [];
  const lines: Line[] = [];
  let start = 0;
  for (let i = 0; i < raw.length; start += (raw[i] as string).length + 1, i++) {
    const line = raw[i] as string;
    const indent = indentOf(line);
    if (indent === line.length) continue; // a blank line (OUTSIDE refuses one of spaces)
    // Markers (`---`, `...`, `%`) are left to the general parser (they fail the key check), and
    // so is deep indentation: every level indents at least one column, so this keeps the
    // recursion below MAX_NESTING_DEPTH levels and leaves the depth check (and its error) to
    // the parser.
    if (indent >= MAX_NESTING_DEPTH) return null;
    let body = indent === 0 ? line : line.slice(indent);
    let cut = false;
    if (hasHash) {
      // go-yaml's comment text: after the `#`, to the end of the line.
      if (body.charCodeAt(0) === 0x23 /* # */) {
        comments.push({ offset: start + indent, line: i, col: indent, text: body.slice(1), trailing: false });
        continue;
      }
      // A `#` after a space ends the content (a quoted scalar cut there fails its pattern).
      const hash = body.indexOf(" #");
      cut = hash !== -1;
      if (cut) {
        const col = indent + hash + 1;
        comments.push({ offset: start + col, line: i, col, text: body.slice(hash + 2), trailing: true });
        body = body.slice(0, hash).trimEnd();
      }
    }
    lines.push({ indent, body, start, line: i, cut });
  }
  const top = lines[0];
  if (top === undefined || top.indent !== 0 || top.body.startsWith("-")) return null;
  const s = new Scanner(lines, comments.length > 0 ? [] : null, raw);
  try {
    s.at = 1;
    const branch = mapping(s, 0, [], top);
    if (s.at !== lines.length) return null;
    const marks = s.marks ?? [];
    // The end of the stream: column -1 tells the comment placer there is no token after it.
    marks.push({
      kind: "end",
      offset: text.length + 0.5,
      line: lineCount,
      col: -1,
      coll: branch,
      order: text.length + 1,
      stack: [],
      ...(/[^\n\r]$/.test(text) ? { unterminated: true } : {}),
    });
    return finishStream([branch], marks, comments, [], (l) => (raw[l] ?? "") === "");
  } catch (err) {
    if (err instanceof Outside) return null;
    throw err;
  }
}
