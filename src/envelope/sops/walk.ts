/**
 * The one tree walk shared by encryption, decryption and the MAC (sops.go walkBranch /
 * walkSlice / shouldBeEncrypted; docs/sops-format.md sections 3 and 4). Encrypt and decrypt both call
 * transformBranches with their own leaf functions, so the order, the AAD and the selection
 * decision cannot diverge between them.
 */
import { RE2JS } from "re2js";
import { BootsealError } from "../../errors.ts";
import { SizeBoundedLru } from "../../size-bounded-lru.ts";
import type { Branch, Comment, Entry, Mapping, Scalar, Sequence, Value } from "./document.ts";
import { DEFAULT_RULE, type SelectionRule } from "./metadata.ts";

/** Comments seen at each nesting level since that level's last real item, outermost first. */
export type CommentStack = readonly (readonly string[])[];

/** Decides whether the leaf or comment at `path` is (to be) encrypted. */
export type Selector = (path: readonly string[], comments: CommentStack, isComment: boolean) => boolean;

/** Where a leaf or comment sits. */
export interface Visit {
  /** Mapping keys from the branch root; list positions are not part of it. */
  readonly path: readonly string[];
  /** The AAD: keys joined by `:` plus a trailing `:` (`:` at the top level). */
  readonly aad: string;
  /** The selection rule's decision for this position. */
  readonly encrypted: boolean;
  /**
   * The leaf or comment is an item of a sequence. sops's walkSlice hands a list's comment to
   * the cipher like a value, so an encrypted one is stored as the list item
   * `ENC[…,type:comment]` (a scalar) and decrypts back to a comment; in a mapping it stays a
   * comment line (`#ENC[…]`).
   */
  readonly inSequence: boolean;
}

export interface LeafTransform {
  /** Called for every non-null scalar, in walk order. A Comment result only in a sequence. */
  scalar(value: Scalar, visit: Visit): Scalar | Comment;
  /** Called for every comment, in walk order. A Scalar result only in a sequence. */
  comment(value: Comment, visit: Visit): Comment | Scalar;
}

/** sops's AAD string for a path. */
export function aadForPath(path: readonly string[]): string {
  return path.join(":") + ":";
}

/** A compiled Go regexp: test() is an unanchored search, as Go's regexp.MatchString. */
export interface GoRegexp {
  test(input: string): boolean;
}

/** Compiled patterns (immutable): a directory run matches every file against the same rules. */
const compiled = new SizeBoundedLru<string, GoRegexp>(256, () => 1);

/**
 * Compile a pattern in Go's RE2 syntax, the dialect sops evaluates every rule and
 * `.sops.yaml` path_regex in. re2js is a port of RE2, so what Go rejects (backreferences,
 * lookaround, `\C`, counts over 1000) is rejected here too: BAD_INPUT with Go's message.
 */
export function compileRegex(pattern: string): GoRegexp {
  const known = compiled.get(pattern);
  if (known) return known;
  try {
    const re = RE2JS.compile(pattern);
    compiled.set(pattern, re);
    return re;
  } catch (cause) {
    const reason = cause instanceof Error ? cause.message : "unknown error";
    throw new BootsealError("BAD_INPUT", `Invalid regular expression: ${reason}`, { cause });
  }
}

/**
 * The same answers, remembered per input: a walk asks about the same few keys once per leaf
 * below them, and re2js is several times slower per call than a native RegExp.
 */
function memoized(re: GoRegexp): (input: string) => boolean {
  const seen = new Map<string, boolean>();
  return (input) => {
    let hit = seen.get(input);
    if (hit === undefined) {
      hit = re.test(input);
      seen.set(input, hit);
    }
    return hit;
  };
}

/**
 * Compile a selection rule. null or an empty value means none recorded, which readers treat
 * as the default `unencrypted_suffix: _unencrypted` (sops ToInternal).
 *
 * Invalid regexes: sops discards the compile error and treats the regex as never matching
 * (an invalid encrypted_regex encrypts nothing). We refuse with BAD_INPUT instead, so a typo
 * in a rule can never silently leave secrets in plaintext.
 */
export function compileRule(rule: SelectionRule | null): Selector {
  const r = rule === null || rule.value === "" ? DEFAULT_RULE : rule;
  const value = r.value;
  switch (r.kind) {
    case "unencrypted_suffix":
      return (path) => !path.some((k) => k.endsWith(value));
    case "encrypted_suffix":
      return (path) => path.some((k) => k.endsWith(value));
    case "unencrypted_regex": {
      const test = memoized(compileRegex(value));
      return (path) => !path.some(test);
    }
    case "encrypted_regex": {
      const test = memoized(compileRegex(value));
      return (path) => path.some(test);
    }
    case "unencrypted_comment_regex": {
      const test = memoized(compileRegex(value));
      // A matching active comment at any level keeps the item (and itself) in plaintext.
      return (_path, comments) => !comments.some((level) => level.some(test));
    }
    case "encrypted_comment_regex": {
      const test = memoized(compileRegex(value));
      return (_path, comments, isComment) => {
        const last = comments.length - 1;
        return comments.some((level, i) =>
          level.some((c, j) => {
            // The marker comment itself (the newest entry of the innermost level) stays readable.
            if (isComment && i === last && j === level.length - 1) return false;
            return test(c);
          }),
        );
      };
    }
    default:
      throw new BootsealError("BAD_INPUT", "Unknown selection rule");
  }
}

/**
 * Walk every branch in sops order and rebuild it through `fn`. Null scalars are skipped
 * (neither visited nor hashed); each branch starts again from the empty path.
 */
export function transformBranches(
  branches: readonly Branch[],
  selector: Selector,
  fn: LeafTransform,
): Branch[] {
  return branches.map((branch) => walkMapping(branch, [], ":", [], selector, fn));
}

// `aad` travels with `path` (aadForPath(path), built one key at a time): joining the whole
// path again for every leaf was a measurable cost on large documents.

function visitOf(
  path: readonly string[],
  aad: string,
  comments: CommentStack,
  isComment: boolean,
  inSequence: boolean,
  selector: Selector,
): Visit {
  return { path, aad, encrypted: selector(path, comments, isComment), inSequence };
}

// A transform's result where only a value may stand (a mapping entry's value).
function asValue(result: Value | Comment): Value {
  if (result.kind === "comment") throw new BootsealError("BAD_INPUT", "Unexpected comment type for a value");
  return result;
}

function walkValue(
  value: Value,
  path: readonly string[],
  aad: string,
  stack: CommentStack,
  selector: Selector,
  fn: LeafTransform,
  inSequence: boolean,
): Value | Comment {
  switch (value.kind) {
    case "map":
      return walkMapping(value, path, aad, stack, selector, fn);
    case "seq":
      return walkSequence(value, path, aad, stack, selector, fn);
    case "scalar":
      if (value.type === "null") return value;
      return fn.scalar(value, visitOf(path, aad, stack, false, inSequence, selector));
  }
}

function walkMapping(
  m: Mapping,
  path: readonly string[],
  aad: string,
  outer: CommentStack,
  selector: Selector,
  fn: LeafTransform,
): Mapping {
  let level: string[] = [];
  const items: (Entry | Comment)[] = [];
  // aadForPath([...path, key]) is this prefix followed by `key:`.
  const prefix = path.length === 0 ? "" : aad;
  for (const item of m.items) {
    if (item.kind === "comment") {
      // Comments join the active list of this level before their own decision (so the
      // comment rules can see them) and do not clear it.
      level = [...level, item.text];
      const result = fn.comment(item, visitOf(path, aad, [...outer, level], true, false, selector));
      // A mapping's comment stays a comment whatever the cipher made of it (sops walkBranch).
      items.push(result.kind === "comment" ? result : { ...item, text: scalarText(result) });
      continue;
    }
    const value = asValue(
      walkValue(
        item.value,
        [...path, item.key],
        `${prefix}${item.key}:`,
        [...outer, level],
        selector,
        fn,
        false,
      ),
    );
    items.push(value === item.value ? item : { kind: "entry", key: item.key, value });
    level = [];
  }
  return { ...m, items };
}

function scalarText(s: Scalar): string {
  if (s.type !== "str" || typeof s.value !== "string") {
    throw new BootsealError("BAD_INPUT", "A comment must stay text");
  }
  return s.value;
}

function walkSequence(
  s: Sequence,
  path: readonly string[],
  aad: string,
  outer: CommentStack,
  selector: Selector,
  fn: LeafTransform,
): Sequence {
  let level: string[] = [];
  const items: (Value | Comment)[] = [];
  for (const item of s.items) {
    if (item.kind === "comment") {
      level = [...level, item.text];
      items.push(fn.comment(item, visitOf(path, aad, [...outer, level], true, true, selector)));
      continue;
    }
    // What decides the comment stack is the input: an `ENC[…,type:comment]` item is a value
    // here (it clears the level), as in sops's walkSlice, even though it decrypts to a comment.
    items.push(walkValue(item, path, aad, [...outer, level], selector, fn, true));
    level = [];
  }
  return { ...s, items };
}
