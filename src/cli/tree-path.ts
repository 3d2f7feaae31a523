/**
 * sops's tree paths (`'["a"]["b"][0]'`, cmd/sops/main.go parseTreePath) and what `set`,
 * `unset` and `--set` do with them (sops.go TreeBranch.Set / Unset). Pure: trees in, trees out.
 *
 * The parser follows sops exactly, quirks included: the text is split at every "[", each piece
 * must end with "]", a piece starting with a quote loses its first and last character (no
 * escapes), anything else is a decimal integer (Go's strconv.Atoi: an optional sign).
 */
import { codecFor } from "../envelope/sops/codecs/index.ts";
import type { Comment, Entry, Mapping, Scalar, Value } from "../envelope/sops/document.ts";
import { BootsealError } from "../errors.ts";

export type PathStep = string | number;

/** Go's strconv.Atoi range (int is 64-bit where sops runs). */
const ATOI = /^[+-]?\d+$/;

export function parseTreePath(text: string): PathStep[] {
  const steps: PathStep[] = [];
  for (const piece of text.split("[")) {
    if (piece === "") continue;
    if (!piece.endsWith("]")) throw new BootsealError("USAGE", `path component ${piece} doesn't end with ]`);
    const inner = piece.slice(0, -1);
    if (inner.startsWith('"') || inner.startsWith("'")) {
      // sops drops the first and last character whatever the last one is.
      if (inner.length < 2) throw new BootsealError("USAGE", `path component ${piece} is not a quoted key`);
      steps.push(inner.slice(1, -1));
    } else if (ATOI.test(inner)) {
      const n = Number(inner);
      if (!Number.isSafeInteger(n)) throw new BootsealError("USAGE", `path index ${inner} is out of range`);
      steps.push(n);
    } else {
      throw new BootsealError("USAGE", `path component ${piece} is neither a quoted key nor an index`);
    }
  }
  return steps;
}

/**
 * A `set` value as sops reads it: JSON; an object becomes a branch through the JSON codec
 * (sops's json store: integers stay integers, key order kept); a top-level number is a Go
 * float64 (encoding/json), as in sops; arrays at the top level are refused, as sops's store
 * refuses them.
 */
export function parseSetValue(text: string): Value {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BootsealError("BAD_SET_VALUE", "Value for --set is not valid JSON");
  }
  if (parsed !== null && typeof parsed === "object") {
    try {
      const branches = codecFor("json").parsePlain(new TextEncoder().encode(text));
      const first = branches[0];
      if (Array.isArray(parsed) || first === undefined) throw new Error("not an object");
      return first;
    } catch {
      throw new BootsealError("BAD_SET_VALUE", "Invalid --set value format");
    }
  }
  if (typeof parsed === "string") return { kind: "scalar", type: "str", value: parsed };
  if (typeof parsed === "boolean") return { kind: "scalar", type: "bool", value: parsed };
  if (typeof parsed === "number") {
    // Go's decoder refuses a number beyond float64 where JSON.parse gives Infinity.
    if (!Number.isFinite(parsed))
      throw new BootsealError("BAD_SET_VALUE", "Value for --set is not valid JSON");
    return { kind: "scalar", type: "float", value: parsed };
  }
  return { kind: "scalar", type: "null" };
}

function sameBytes(a: string | Uint8Array, b: string | Uint8Array): boolean {
  if (typeof a === "string" || typeof b === "string") return a === b;
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function sameScalar(a: Scalar, b: Scalar): boolean {
  if (a.type !== b.type) return false;
  if (a.type === "null") return true;
  const bv = (b as { value: unknown }).value;
  if (a.type === "str" || a.type === "bytes") return sameBytes(a.value, bv as string | Uint8Array);
  return a.value === bv;
}

/** sops.go `equals`: same shape, same keys in order, same scalars (typed: 1 is not 1.0). */
export function sameNode(a: Value | Comment | Entry, b: Value | Comment | Entry): boolean {
  if (a.kind === "comment") return b.kind === "comment" && a.text === b.text;
  if (a.kind === "entry") return b.kind === "entry" && a.key === b.key && sameNode(a.value, b.value);
  if (a.kind === "scalar") return b.kind === "scalar" && sameScalar(a, b);
  if (b.kind !== a.kind || b.items.length !== a.items.length) return false;
  const other = b.items as readonly (Value | Comment | Entry)[];
  return a.items.every((item, i) => sameNode(item, other[i] as Value | Comment | Entry));
}

/** sops.go valueFromPathAndLeaf: the nested value a missing path creates. */
function valueFromPath(path: readonly PathStep[], leaf: Value): Value {
  const [step, ...rest] = path;
  const inner = rest.length === 0 ? leaf : valueFromPath(rest, leaf);
  if (typeof step === "number") return { kind: "seq", items: [inner] };
  return { kind: "map", items: [{ kind: "entry", key: step as string, value: inner }] };
}

function badIndex(step: PathStep): BootsealError {
  return new BootsealError("USAGE", `path index ${String(step)} cannot address a list`);
}

function setIn(node: Value, path: readonly PathStep[], value: Value): { node: Value; changed: boolean } {
  const [step, ...rest] = path as [PathStep, ...PathStep[]];
  if (node.kind === "map") {
    const items = [...node.items];
    const i = items.findIndex((item) => item.kind === "entry" && item.key === step);
    const found = items[i];
    if (found?.kind === "entry") {
      const result =
        rest.length === 0
          ? { node: value, changed: !sameNode(found.value, value) }
          : setIn(found.value, rest, value);
      items[i] = { ...found, value: result.node };
      return { node: { ...node, items }, changed: result.changed };
    }
    const created = valueFromPath(path, value);
    // sops: an index under a mapping creates nothing, yet reports a change.
    if (created.kind === "map") items.push(created.items[0] as Entry);
    return { node: { ...node, items }, changed: true };
  }
  if (node.kind === "seq") {
    if (typeof step !== "number" || step < 0) throw badIndex(step);
    const items = [...node.items];
    if (step >= items.length) {
      items.push(rest.length === 0 ? value : valueFromPath(rest, value));
      return { node: { ...node, items }, changed: true };
    }
    const current = items[step] as Value | Comment;
    if (rest.length === 0) {
      items[step] = value;
      return { node: { ...node, items }, changed: !sameNode(current, value) };
    }
    // A comment in a list is replaced like a scalar (sops's default case).
    const result =
      current.kind === "comment"
        ? { node: valueFromPath(rest, value), changed: true }
        : setIn(current, rest, value);
    items[step] = result.node;
    return { node: { ...node, items }, changed: result.changed };
  }
  const created = valueFromPath(path, value);
  return { node: created, changed: !sameNode(node, created) };
}

/** TreeBranch.Set: the new first document and whether anything changed (for --idempotent). */
export function setPath(
  branch: Mapping,
  path: readonly PathStep[],
  value: Value,
): { branch: Mapping; changed: boolean } {
  if (path.length === 0) throw new BootsealError("USAGE", "the path is empty");
  const { node, changed } = setIn(branch, path, value);
  return { branch: node as Mapping, changed };
}

function unsetIn(node: Value, path: readonly PathStep[]): Value {
  const [step, ...rest] = path as [PathStep, ...PathStep[]];
  if (node.kind === "map") {
    const i = node.items.findIndex((item) => item.kind === "entry" && item.key === step);
    const found = node.items[i];
    if (found?.kind !== "entry") throw new BootsealError("NOT_FOUND", `Key not found: ${String(step)}`);
    const items = [...node.items];
    if (rest.length === 0) items.splice(i, 1);
    else items[i] = { ...found, value: unsetIn(found.value, rest) };
    return { ...node, items };
  }
  if (node.kind === "seq") {
    if (typeof step !== "number" || step < 0) throw badIndex(step);
    if (step >= node.items.length) throw new BootsealError("NOT_FOUND", `Index ${step} out of bounds`);
    const items = [...node.items];
    const current = items[step] as Value | Comment;
    if (rest.length === 0) items.splice(step, 1);
    else if (current.kind === "comment") throw unsupported(rest[0] as PathStep);
    else items[step] = unsetIn(current, rest);
    return { ...node, items };
  }
  throw unsupported(step);
}

function unsupported(step: PathStep): BootsealError {
  // Not NOT_FOUND: sops's --idempotent forgives only a missing key, not a path through a scalar.
  return new BootsealError("BAD_INPUT", `Unsupported type for item '${String(step)}': not a mapping or list`);
}

/** TreeBranch.Unset: NOT_FOUND when the key or index is missing (what --idempotent forgives). */
export function unsetPath(branch: Mapping, path: readonly PathStep[]): Mapping {
  if (path.length === 0) throw new BootsealError("USAGE", "the path is empty");
  return unsetIn(branch, path) as Mapping;
}
