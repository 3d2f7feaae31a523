/**
 * The YAML parsers' intermediate tree and its last step, shared by the general parser
 * (./yaml-parse.ts) and the line-scanning fast path (./yaml-fast.ts): collections whose
 * slots (entries, items, comments) carry a source order, and marks of structural tokens.
 * finishStream places the comments (./yaml-comments.ts) and turns each document's top
 * collection into a branch, expanding aliases within go-yaml's budget (./yaml-limits.ts).
 */
import type { Branch, Comment, Entry, Mapping, Scalar, Sequence, Value } from "../document.ts";
import { type Mark, type PColl, placeComments, type RawComment } from "./yaml-comments.ts";
import { Expansion } from "./yaml-limits.ts";

export type PValue =
  | { readonly kind: "scalar"; readonly scalar: Scalar }
  | { readonly kind: "coll"; readonly coll: PColl }
  /** An alias: expanded (and counted against the budget, ./yaml-limits.ts) when finished. */
  | { readonly kind: "alias"; readonly target: PValue };

/** What an alias stands for. */
export function deref(value: PValue): Exclude<PValue, { kind: "alias" }> {
  let v = value;
  while (v.kind === "alias") v = v.target;
  return v;
}

/** Text units a scalar holds (what its output is at least as long as). */
function unitsOf(s: Scalar): number {
  if (s.type === "str" || s.type === "time")
    return typeof s.value === "string" ? s.value.length : s.value.byteLength;
  return s.type === "bytes" ? s.value.byteLength : 0;
}

function toComment(c: { text: string; inline: boolean }, x: Expansion): Comment {
  x.text(c.text.length);
  return c.inline ? { kind: "comment", text: c.text, inline: true } : { kind: "comment", text: c.text };
}

/**
 * The tree of a value, aliases expanded within the budget `x`; `depth` is the nesting level a
 * collection here would have (the top mapping is level 1).
 */
function finish(value: PValue, x: Expansion, depth: number): Value {
  if (value.kind === "alias") {
    x.node(0); // go-yaml counts the alias node itself, then what it expands to
    x.enterAlias();
    const expanded = finish(value.target, x, depth);
    x.leaveAlias();
    return expanded;
  }
  if (value.kind === "scalar") {
    x.node(unitsOf(value.scalar));
    return value.scalar;
  }
  x.node(0, depth);
  const slots = [...value.coll.slots].sort((a, b) => a.order - b.order);
  if (value.coll.kind === "map") {
    const items: (Entry | Comment)[] = [];
    for (const s of slots) {
      if (s.comment) items.push(toComment(s.comment, x));
      else {
        const key = s.key ?? "";
        x.node(key.length);
        items.push({ kind: "entry", key, value: finish(s.value as PValue, x, depth + 1) });
      }
    }
    return { kind: "map", items } satisfies Mapping;
  }
  const items: (Value | Comment)[] = slots.map((s) =>
    s.comment ? toComment(s.comment, x) : finish(s.value as PValue, x, depth + 1),
  );
  return { kind: "seq", items } satisfies Sequence;
}

/**
 * The branches of a stream: every comment placed among the marks (sorted here), then each
 * document's top collection finished. `blank(line)`: whether a source line (0-based) is empty.
 */
export function finishStream(
  tops: readonly PColl[],
  marks: Mark[],
  comments: readonly RawComment[],
  flows: readonly PColl[],
  blank: (line: number) => boolean,
): Branch[] {
  if (comments.length > 0) {
    marks.sort((a, b) => a.offset - b.offset);
    placeComments(comments, marks, flows, blank);
  }
  const expansion = new Expansion();
  return tops.map((top) => {
    expansion.node(0); // the document node, as go-yaml counts it
    return finish({ kind: "coll", coll: top }, expansion, 1) as Branch;
  });
}
