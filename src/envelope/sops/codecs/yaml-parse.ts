/**
 * YAML text -> branches, as sops' YAML store reads it (stores/yaml/store.go over go-yaml v3).
 * The `yaml` package parses (and reports syntax errors); its CST gives every token with its
 * offset, so this module builds the tree itself: scalars typed as go-yaml types them
 * (./yaml-scalar.ts), anchors expanded, and comments placed by ./yaml-comments.ts.
 */
import { Composer, CST, LineCounter, parseAllDocuments } from "yaml";
import { BootsealError } from "../../../errors.ts";
import type { Branch, Scalar } from "../document.ts";
import { blockScalarValue } from "./yaml-block-end.ts";
import type { Mark, PColl, RawComment } from "./yaml-comments.ts";
import { expandTag, streamDirectives, type TagHandles } from "./yaml-directives.ts";
import { parseSimpleYaml } from "./yaml-fast.ts";
import { boundedTokens, tooDeep, tooDeepAt } from "./yaml-limits.ts";
import { resolvePlain, resolveTagged } from "./yaml-scalar.ts";
import { deref, finishStream, type PValue } from "./yaml-tree.ts";

interface Walk {
  readonly text: string;
  readonly lines: LineCounter;
  readonly marks: Mark[];
  readonly flows: PColl[];
  readonly comments: RawComment[];
  anchors: Map<string, PValue>;
  /** The current document's %TAG handles. */
  tags: TagHandles;
}

const bad = (w: Walk, offset: number, message: string): never => {
  throw new BootsealError("BAD_INPUT", `yaml: line ${w.lines.linePos(offset).line}: ${message}`);
};

function pos(w: Walk, offset: number): { line: number; col: number } {
  const p = w.lines.linePos(offset);
  return { line: p.line - 1, col: p.col - 1 };
}

function mark(
  w: Walk,
  kind: Mark["kind"],
  offset: number,
  coll: PColl,
  order: number,
  stack: readonly PColl[],
  flowValue?: PColl,
): void {
  const p = pos(w, offset);
  w.marks.push({
    kind,
    offset,
    line: p.line,
    col: p.col,
    coll,
    order,
    stack,
    ...(flowValue ? { flowValue } : {}),
  });
}

/** Anchor and tag tokens among a list of source tokens. */
function props(tokens: readonly CST.SourceToken[] | undefined): { anchor?: string; tag?: string } {
  const out: { anchor?: string; tag?: string } = {};
  for (const t of tokens ?? []) {
    if (t.type === "anchor") out.anchor = t.source.slice(1);
    if (t.type === "tag") out.tag = t.source;
  }
  return out;
}

function tokenEnd(token: CST.Token): number {
  if (token.type === "flow-collection") {
    const close = token.end.find((t) => t.type === "flow-map-end" || t.type === "flow-seq-end");
    return close ? close.offset + 1 : token.offset + 1;
  }
  if ("source" in token) return token.offset + token.source.length;
  return token.offset;
}

function isBlock(token: CST.Token | undefined | null): boolean {
  return token?.type === "block-map" || token?.type === "block-seq";
}

/** A scalar token's value: plain scalars resolved like go-yaml, everything else a string. */
function scalarValue(w: Walk, token: CST.Token, tag: string | undefined): Scalar {
  const resolved = CST.resolveAsScalar(token);
  if (!resolved) return bad(w, token.offset, "unexpected token");
  const text = token.type === "block-scalar" ? blockScalarValue(token) : resolved.value;
  const line = w.lines.linePos(token.offset).line;
  if (tag !== undefined && tag !== "!") return resolveTagged(text, tag, line);
  if (resolved.type !== "PLAIN" || tag === "!") return { kind: "scalar", type: "str", value: text };
  const r = resolvePlain(resolved.value);
  if (r.type === "uint") return bad(w, token.offset, "integer out of the signed 64-bit range");
  return r;
}

/** Walk one value token. `stack` holds the open block collections (outermost first). */
function walkValue(
  w: Walk,
  token: CST.Token | undefined | null,
  stack: readonly PColl[],
  rawTag: string | undefined,
  at: number,
): PValue {
  const tag = rawTag === undefined ? undefined : expandTag(rawTag, w.tags, w.lines.linePos(at).line);
  if (!token)
    return {
      kind: "scalar",
      scalar: tag ? resolveTagged("", tag, w.lines.linePos(at).line) : { kind: "scalar", type: "null" },
    };
  switch (token.type) {
    case "alias": {
      const target = w.anchors.get(token.source.slice(1));
      return target ? { kind: "alias", target } : bad(w, token.offset, "unknown anchor");
    }
    case "scalar":
    case "single-quoted-scalar":
    case "double-quoted-scalar":
    case "block-scalar":
      return { kind: "scalar", scalar: scalarValue(w, token, tag) };
    case "block-map":
      return { kind: "coll", coll: walkBlockMap(w, token, stack) };
    case "block-seq":
      return { kind: "coll", coll: walkBlockSeq(w, token, stack) };
    case "flow-collection":
      return { kind: "coll", coll: walkFlow(w, token, stack) };
    default:
      return bad(w, token.offset, "unexpected token");
  }
}

function newColl(w: Walk, kind: "map" | "seq", offset: number, flow: boolean): PColl {
  return { kind, col: pos(w, offset).col, flow, start: offset, end: offset, slots: [] };
}

function register(w: Walk, anchor: string | undefined, value: PValue): PValue {
  if (anchor) w.anchors.set(anchor, value);
  return value;
}

function keyOf(
  w: Walk,
  token: CST.Token | null | undefined,
  start: readonly CST.SourceToken[],
  at: number,
): string {
  const p = props(start);
  const found = token ? walkValue(w, token, [], p.tag, at) : undefined;
  register(w, p.anchor, found ?? { kind: "scalar", scalar: { kind: "scalar", type: "null" } });
  const key = found && deref(found);
  if (key?.kind !== "scalar" || key.scalar.type !== "str" || typeof key.scalar.value !== "string") {
    return bad(w, token?.offset ?? at, "Only string keys are supported");
  }
  return key.scalar.value;
}

/** Marks for a scalar or flow value: its end, and for a block scalar also its header line. */
function valueMarks(
  w: Walk,
  token: CST.Token | undefined,
  value: PValue,
  coll: PColl,
  order: number,
  stack: readonly PColl[],
): void {
  if (!token || isBlock(token)) return;
  // sops keeps the line comment of a flow collection that is a mapping value inside that
  // collection; in a sequence every item's line comment stays inline before the item.
  const inMap = coll.kind === "map";
  const v = deref(value);
  const flowValue = inMap && token.type === "flow-collection" && v.kind === "coll" ? v.coll : undefined;
  if (token.type === "block-scalar") mark(w, "value", token.offset, coll, order, stack);
  mark(w, "value", tokenEnd(token) - 1, coll, order, stack, flowValue);
}

function walkBlockMap(w: Walk, token: CST.BlockMap, outer: readonly PColl[]): PColl {
  const coll = newColl(w, "map", token.offset, false);
  const stack = [...outer, coll];
  const seen = new Set<string>();
  for (const item of token.items) {
    if (!item.key && !item.sep) continue; // only comments or whitespace
    const keyAt =
      item.key?.offset ??
      item.start.find((t) => t.type === "explicit-key-ind")?.offset ??
      item.sep?.[0]?.offset ??
      token.offset;
    const key = keyOf(w, item.key, item.start, keyAt);
    if (seen.has(key)) bad(w, keyAt, `mapping key "${key.slice(0, 40)}" already defined`);
    seen.add(key);
    mark(w, "key", keyAt, coll, keyAt, stack);
    const sep = item.sep ?? [];
    const ind = sep.find((t) => t.type === "map-value-ind");
    const p = props(sep);
    const valueOnLaterLine = ind && (!item.value || pos(w, item.value.offset).line > pos(w, ind.offset).line);
    if (ind && valueOnLaterLine) mark(w, "sep", ind.offset, coll, keyAt, stack);
    const value = register(w, p.anchor, walkValue(w, item.value, stack, p.tag, ind?.offset ?? keyAt));
    valueMarks(w, item.value, value, coll, keyAt, stack);
    coll.slots.push({ order: keyAt, key, value });
  }
  return coll;
}

function walkBlockSeq(w: Walk, token: CST.BlockSequence, outer: readonly PColl[]): PColl {
  const coll = newColl(w, "seq", token.offset, false);
  const stack = [...outer, coll];
  for (const item of token.items) {
    const dash = item.start.find((t) => t.type === "seq-item-ind");
    if (!dash) continue;
    const p = props(item.start);
    if (!item.value) {
      w.marks.push({
        kind: "item",
        offset: dash.offset,
        ...pos(w, dash.offset),
        coll,
        order: dash.offset,
        stack,
        empty: true,
      });
    } else mark(w, "item", dash.offset, coll, dash.offset, stack);
    if (!item.value || pos(w, item.value.offset).line > pos(w, dash.offset).line) {
      mark(w, "dash", dash.offset + 0.5, coll, dash.offset, stack);
    }
    const value = register(w, p.anchor, walkValue(w, item.value, stack, p.tag, dash.offset));
    valueMarks(w, item.value, value, coll, dash.offset, stack);
    coll.slots.push({ order: dash.offset, value });
  }
  return coll;
}

function walkFlow(w: Walk, token: CST.FlowCollection, stack: readonly PColl[]): PColl {
  const isMap = token.start.source === "{";
  const coll = newColl(w, isMap ? "map" : "seq", token.offset, true);
  coll.end = tokenEnd(token);
  w.flows.push(coll);
  const seen = new Set<string>();
  token.items.forEach((item, i) => {
    const sep = item.sep ?? [];
    const pair = item.key !== undefined || sep.some((t) => t.type === "map-value-ind");
    const order = item.key?.offset ?? item.value?.offset ?? item.start[0]?.offset ?? token.offset + i;
    if (!pair && !item.value && !item.start.some((t) => t.type === "anchor" || t.type === "tag")) return;
    const p = props(pair ? sep : item.start);
    if (!pair) {
      coll.slots.push({ order, value: register(w, p.anchor, walkValue(w, item.value, stack, p.tag, order)) });
      return;
    }
    const key = keyOf(w, item.key, item.start, order);
    const value = register(w, p.anchor, walkValue(w, item.value, stack, p.tag, order));
    if (isMap) {
      if (seen.has(key)) bad(w, order, `mapping key "${key.slice(0, 40)}" already defined`);
      seen.add(key);
      coll.slots.push({ order, key, value });
    } else {
      // `[a: 1]` is a sequence holding a single-pair mapping.
      const single: PColl = {
        kind: "map",
        col: 0,
        flow: true,
        start: order,
        end: order,
        slots: [{ order, key, value }],
      };
      coll.slots.push({ order, value: { kind: "coll", coll: single } });
    }
  });
  return coll;
}

function collectComments(w: Walk, node: unknown): void {
  if (Array.isArray(node)) {
    for (const n of node) collectComments(w, n);
    return;
  }
  if (typeof node !== "object" || node === null) return;
  const t = node as { type?: string; offset?: number; source?: string };
  if (t.type === "comment" && typeof t.offset === "number" && typeof t.source === "string") {
    const p = pos(w, t.offset);
    const before = w.text.slice(t.offset - p.col, t.offset);
    // go-yaml drops the `#` and keeps the rest of the line (without a CR).
    w.comments.push({
      ...p,
      offset: t.offset,
      text: t.source.slice(1).replace(/\r$/, ""),
      trailing: before.trim() !== "",
    });
    return;
  }
  for (const v of Object.values(node)) if (typeof v === "object") collectComments(w, v);
}

const PARSE_OPTIONS = { schema: "failsafe", uniqueKeys: false, merge: false } as const;

/** The first syntax error of the stream, as BAD_INPUT with the `yaml` package's own message. */
function throwFirstError(text: string): void {
  const lines = new LineCounter();
  for (const doc of parseAllDocuments(text, { ...PARSE_OPTIONS, lineCounter: lines })) {
    const error = "errors" in doc ? doc.errors[0] : undefined;
    if (error) {
      const line = error.linePos?.[0]?.line ?? lines.linePos(error.pos[0]).line;
      // The package's messages may quote the source after a colon ("…: |x", "Not a YAML
      // token: …") and add " at line L, column C:" with the line itself: keep the description.
      const description = (error.message.split("\n")[0] ?? "").split(/: | at line \d/)[0]?.slice(0, 120);
      throw new BootsealError("BAD_INPUT", `yaml: line ${line}: ${description} (${error.code})`);
    }
  }
}

/** Parse every document of a YAML stream into branches (sops LoadPlainFile). */
export function parseYaml(text: string): Branch[] {
  // Plain block YAML (what sops writes) has a line-by-line fast path with the same result.
  return parseSimpleYaml(text) ?? parseYamlGeneral(text);
}

/** parseYaml without the fast path (the reference its differential test compares against). */
export function parseYamlGeneral(text: string): Branch[] {
  // One CST parse serves both the error check (the composer, as parseAllDocuments runs it)
  // and the walk below; only a stream with errors is parsed again, for the exact message.
  const lines = new LineCounter();
  const tokens = boundedTokens(text, lines);
  // Before anything recursive (the composer, collectComments, the walk) sees the tokens.
  const deep = tooDeepAt(tokens);
  if (deep !== undefined) throw tooDeep(lines.linePos(deep).line);
  for (const doc of new Composer({ ...PARSE_OPTIONS, lineCounter: lines }).compose(tokens)) {
    if (doc.errors.length > 0) {
      throwFirstError(text);
      break;
    }
  }
  const w: Walk = { text, lines, marks: [], flows: [], comments: [], anchors: new Map(), tags: new Map() };
  const tops: PColl[] = [];
  const starts: (number | undefined)[] = [];
  collectComments(w, tokens);
  const directives = streamDirectives(tokens, (offset) => lines.linePos(offset).line);
  // go-yaml discards a comment on a directive's line (scanner: "for the time being").
  const kept = w.comments.filter((c) => !(c.trailing && directives.lines.has(c.line + 1)));
  w.comments.splice(0, w.comments.length, ...kept);
  let docIndex = 0;
  for (const token of tokens) {
    if (token.type !== "document") continue;
    w.tags = directives.handles[docIndex++] ?? new Map();
    w.anchors = new Map(); // anchors are per document
    const p = props(token.start);
    const found = token.value ? walkValue(w, token.value, [], p.tag, token.offset) : undefined;
    const value = found && deref(found);
    if (value?.kind === "coll" && value.coll.kind === "seq")
      bad(w, token.offset, "YAML documents that are sequences are not supported");
    if (value?.kind === "scalar" && value.scalar.type !== "null")
      bad(w, token.offset, "YAML documents that are values are not supported");
    tops.push(value?.kind === "coll" ? value.coll : newColl(w, "map", token.offset, false));
    starts.push(
      token.start.find((t) => t.type === "doc-start")?.offset ?? (tops.length > 1 ? token.offset : undefined),
    );
  }
  // Comments before a `---` belong to the document they follow; after it, to the new one.
  tops.forEach((top, k) => {
    const at = starts[k];
    if (at === undefined) return;
    const prev = tops[k - 1];
    if (prev)
      w.marks.push({ kind: "end", offset: at - 0.25, ...pos(w, at), coll: prev, order: at, stack: [] });
    mark(w, "doc", at, top, at, []);
  });
  const last = tops.at(-1);
  // The end of the stream: column -1 tells the comment placer there is no token after it.
  if (last)
    w.marks.push({
      kind: "end",
      offset: text.length + 0.5,
      line: lines.lineStarts.length,
      col: -1,
      coll: last,
      order: text.length + 1,
      stack: [],
      ...(/[^\n\r]$/.test(text) ? { unterminated: true } : {}),
    });
  let textLines: string[] | undefined; // split only when there are comments to place
  const blank = (l: number): boolean => {
    textLines ??= text.split(/\r?\n|\r/);
    return (textLines[l] ?? "").trim() === "";
  };
  return finishStream(tops, w.marks, w.comments, w.flows, blank);
}
