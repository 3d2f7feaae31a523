/**
 * Where go-yaml v3 (and so sops) puts each comment line. go-yaml's scanner splits a run of
 * comment lines into "foot" comments of the content before them and "head" comments of the
 * content after them (scannerc.go scan_comments); sops then lists every comment inside the
 * mapping or sequence that holds the node it is attached to. This module restates that split
 * over source positions: the parser records "marks" (keys, sequence dashes, value ends) and
 * the comments, and placeComments decides each comment's container and order.
 * The container matters beyond cosmetics: it is the AAD path of an encrypted comment.
 */

/** A mapping or sequence being built; slots are sorted by (order) when the tree is finished. */
export interface PColl {
  readonly kind: "map" | "seq";
  /** Column of the keys (map) or dashes (seq); flow collections use their opening bracket. */
  readonly col: number;
  readonly flow: boolean;
  readonly start: number;
  end: number;
  readonly slots: PSlot[];
}

export interface PSlot {
  readonly order: number;
  readonly comment?: { readonly text: string; readonly inline: boolean };
  readonly key?: string;
  readonly value?: unknown;
}

export type MarkKind = "key" | "item" | "value" | "sep" | "dash" | "doc" | "end";

/** A structural token, in source order. */
export interface Mark {
  readonly kind: MarkKind;
  readonly offset: number;
  readonly line: number;
  readonly col: number;
  /** The collection the key/item/value belongs to (for doc/end: the document's top mapping). */
  readonly coll: PColl;
  /** Order of the entry this mark belongs to, for comments placed just before it. */
  readonly order: number;
  /** Open block collections, outermost first (the scanner's indentation stack). */
  readonly stack: readonly PColl[];
  /** A flow collection value: its own line comment goes inside it. */
  readonly flowValue?: PColl;
  /**
   * An item mark of an empty sequence entry (`-` and no value, tagged or not): go-yaml makes
   * it an empty scalar event, which takes no comments, so the head comments before it wait
   * for the next node that does (parserc.go process_empty_scalar).
   */
  readonly empty?: boolean;
  /**
   * The end of an input whose last line has no line break. go-yaml's stream end then sits on
   * that line rather than on a blank one after it, so a comment run ending the input is a foot
   * of the innermost open block, unless a blank line came before the run.
   */
  readonly unterminated?: boolean;
}

export interface RawComment {
  readonly offset: number;
  readonly line: number;
  readonly col: number;
  readonly text: string;
  /** Something other than whitespace precedes it on its line. */
  readonly trailing: boolean;
}

function put(coll: PColl, order: number, text: string, inline: boolean): void {
  coll.slots.push({ order, comment: { text, inline } });
}

/** Index of the last mark with offset < `offset` (marks sorted by offset), or -1. */
function lastBefore(marks: readonly Mark[], offset: number): number {
  let lo = 0;
  let hi = marks.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if ((marks[mid]?.offset ?? 0) < offset) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

/**
 * Adds every comment to the slots of its container. `blank(line)` tells whether a source line
 * is empty (the scanner's foot/head split depends on blank lines).
 */
export function placeComments(
  comments: readonly RawComment[],
  marks: readonly Mark[],
  flows: readonly PColl[],
  blank: (line: number) => boolean,
): void {
  let gap: RawComment[] = [];
  let gapPrev: Mark | undefined;
  let gapNext: Mark | undefined;
  let gapNextAt = -1;
  const flush = (): void => {
    if (gap.length > 0 && gapNext) placeGap(gap, gapPrev, gapNext, headTarget(marks, gapNextAt), blank);
    gap = [];
  };
  for (const c of comments) {
    // Comments inside a flow collection stay in it (go-yaml keeps them there too, roughly).
    const flow = flows.filter((f) => f.start < c.offset && c.offset < f.end).at(-1);
    if (flow) {
      put(flow, c.offset, c.text, false);
      continue;
    }
    const i = lastBefore(marks, c.offset);
    const prev = marks[i];
    const next = marks[i + 1];
    if (c.trailing && prev && prev.line === c.line && prev.kind !== "dash") {
      flush();
      if (prev.kind === "value" && prev.flowValue)
        put(prev.flowValue, prev.flowValue.start + 0.5, c.text, false);
      else if (prev.kind === "value") put(prev.coll, prev.order - 0.5, c.text, true);
      else if (prev.kind === "sep") put(prev.coll, prev.order - 0.5, c.text, false);
      else put(prev.coll, c.offset, c.text, false);
      continue;
    }
    if (!next) continue; // cannot happen: every document ends with an "end" mark
    if (gapNext !== next) flush();
    gapPrev = prev;
    gapNext = next;
    gapNextAt = i + 1;
    gap.push(c);
  }
  flush();
}

/**
 * The mark whose node takes the head comments written before marks[at]: that mark, or past
 * empty sequence entries the next key or item; undefined when a document's end comes first
 * (go-yaml then drops them).
 */
function headTarget(marks: readonly Mark[], at: number): Mark | undefined {
  const first = marks[at];
  if (!first?.empty) return first;
  for (let k = at + 1; k < marks.length; k++) {
    const m = marks[k];
    if (!m || m.kind === "doc" || m.kind === "end") return undefined;
    if ((m.kind === "key" || m.kind === "item") && !m.empty) return m;
  }
  return undefined;
}

/** One run of full-line comments between two marks: split into feet and heads (scan_comments). */
function placeGap(
  gap: readonly RawComment[],
  prev: Mark | undefined,
  next: Mark,
  target: Mark | undefined,
  blank: (line: number) => boolean,
): void {
  const stack = prev?.stack ?? [];
  const nextIndent = stack.at(-1)?.col ?? 0;
  // A foot must start on the line just below the previous token (not after a bare `key:`).
  const footLine = prev && prev.line > 0 && prev.kind !== "sep" ? prev.line + 1 : -1;
  let firstEmpty = prev === undefined || !rangeHasBlank(prev.line + 1, (gap[0]?.line ?? 0) - 1, blank);
  let text: RawComment[] = [];

  // The run ends an input without a final line break (see Mark.unterminated).
  const openEnd = next.kind === "end" && next.unterminated === true;
  let feet = 0;
  // A foot is attached to the token before the run (so to the innermost open block) unless
  // go-yaml re-anchors it at its own position: a dedented foot ended by a blank line, or any
  // foot after the first; those land in the enclosing block at (or left of) their column.
  const foot = (byColumn: boolean): void => {
    const start = text[0];
    if (!start) return;
    // At an open end the foot stays with the last value, and go-yaml's parser hands a
    // sequence item's foot to the key holding the sequence: the innermost mapping takes it.
    let coll = (openEnd ? stack.findLast((c) => c.kind === "map") : stack.at(-1)) ?? next.coll;
    if (byColumn || feet > 0) {
      const at = stack.findLastIndex((c) => c.col <= start.col);
      // A dedented foot at a block sequence's column is that sequence's own foot; go-yaml
      // (parser.go mapping) moves a value's foot to its key, so it lands in the nearest
      // enclosing mapping, after the entry.
      const home = byColumn ? stack.findLastIndex((c, k) => k <= at && c.kind === "map") : at;
      coll = stack[home] ?? stack[0] ?? next.coll;
    }
    for (const c of text) put(coll, c.offset, c.text, false);
    text = [];
    feet++;
  };
  const footIfBlankFollows = (): void => {
    const start = text[0];
    if (
      start &&
      firstEmpty &&
      ((start.line === footLine && prev?.kind !== "sep") || start.col < nextIndent)
    ) {
      foot(!openEnd && start.col < nextIndent);
    }
  };

  let line = prev ? prev.line + 1 : 0;
  for (const c of gap) {
    let sawBlank = false;
    for (; line < c.line; line++) {
      if (blank(line) && !sawBlank) {
        footIfBlankFollows();
        firstEmpty = false;
        sawBlank = true;
      }
    }
    const start = text[0];
    if (start && c.col < nextIndent && c.col !== start.col) foot(false);
    text.push(c);
    line = c.line + 1;
  }
  // What follows the run: a blank line, or the next token at some column.
  if (line < next.line && rangeHasBlank(line, next.line - 1, blank)) footIfBlankFollows();
  else if (next.kind === "end" && next.col < 0) {
    if (openEnd && firstEmpty) foot(false);
    else footIfBlankFollows(); // end of stream counts as a blank line
  } else {
    const start = text[0];
    if (start && next.col < nextIndent && next.col !== start.col) foot(false);
  }
  // The rest is the head of the next token (of the node that takes it: see headTarget).
  if (target === next) for (const c of text) put(next.coll, c.offset, c.text, false);
  else if (target) {
    // Just before the target, after anything between (the empty entries), in source order.
    const span = text.length + 1;
    text.forEach((c, k) => {
      put(target.coll, target.order - 0.75 + (0.25 * (k + 1)) / span, c.text, false);
    });
  }
}

function rangeHasBlank(from: number, to: number, blank: (line: number) => boolean): boolean {
  for (let l = from; l <= to; l++) if (blank(l)) return true;
  return false;
}
