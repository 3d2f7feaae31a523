/**
 * Metadata flattening for the flat formats (sops stores/flatten.go): dotenv and INI cannot
 * nest, so the metadata tree becomes one name per leaf, each mapping step written
 * `__map_<key>` and each list step `__list_<index>` (`pgp__list_0__map_fp`).
 *
 * flatten keeps the tree's order (depth first): the metadata module already hands over the
 * alphabetical tree sops 3.13 writes, and re-sorting flattened names would change the
 * output (`age__list_0__map_enc` must come before `age__list_0__map_recipient`, but a
 * sort of names would also reorder across lists with 10+ entries).
 *
 * unflatten accepts any order, as sops does (3.5 wrote names in Go map order): map keys come
 * out sorted by bytes like sops's convert(), list entries by index; every value is a str.
 */
import { BootsealError } from "../../../errors.ts";
import { MAX_NESTING_DEPTH } from "../../../limits.ts";
import type { Entry, Mapping, Value } from "../document.ts";
import { entry, mapping, str } from "../document.ts";
import { scalarText } from "./flat-text.ts";

const MAP_STEP = "__map_";
const LIST_STEP = "__list_";

/** One flattened metadata leaf: its name (prefix included) and its text. */
export type FlatPair = readonly [name: string, value: string];

function fail(message: string): never {
  throw new BootsealError("BAD_INPUT", `metadata: ${message}`);
}

/** Flatten a metadata tree, depth first in the tree's order; `prefix` is `sops_` for dotenv. */
export function flattenMetadata(tree: Mapping, prefix = ""): FlatPair[] {
  const out: FlatPair[] = [];
  const seen = new Set<string>();
  const descend = (value: Value, name: string): void => {
    if (value.kind === "map") {
      for (const item of value.items) {
        if (item.kind === "entry") descend(item.value, name + MAP_STEP + item.key);
      }
    } else if (value.kind === "seq") {
      // Comments are skipped and do not take an index (flattenDescendArray).
      let index = 0;
      for (const item of value.items) {
        if (item.kind === "comment") continue;
        descend(item, name + LIST_STEP + index);
        index++;
      }
    } else {
      if (seen.has(name)) fail(`key collision ${JSON.stringify(name)} while flattening`);
      seen.add(name);
      const text = scalarText(value);
      if (typeof text !== "string") fail(`value of ${JSON.stringify(name)} is not text`);
      out.push([name, text]);
    }
  };
  for (const item of tree.items) {
    if (item.kind === "entry") descend(item.value, prefix + item.key);
  }
  return out;
}

type Step = { readonly map: string } | { readonly list: number };

/** Split a flattened name into steps; the first step is always a map key (sops tokenize). */
function tokenize(name: string): Step[] {
  const steps: Step[] = [];
  let kind: "map" | "list" = "map";
  let start = 0;
  for (;;) {
    const m = name.indexOf(MAP_STEP, start);
    const l = name.indexOf(LIST_STEP, start);
    // Whichever separator comes first ends the current step; they cannot start at one index.
    const next = m === -1 ? l : l === -1 ? m : Math.min(m, l);
    const text = name.slice(start, next === -1 ? undefined : next);
    if (kind === "map") {
      steps.push({ map: text });
    } else {
      // sops's Atoi ignores its error (a bad index silently becomes 0): refuse instead.
      if (!/^[0-9]{1,9}$/.test(text)) fail(`bad list index in ${JSON.stringify(name)}`);
      steps.push({ list: Number(text) });
    }
    if (next === -1) return steps;
    // Each step is a level of the tree unflattenMetadata builds (and convert recurses over).
    if (steps.length >= MAX_NESTING_DEPTH) fail(`a name nests deeper than ${MAX_NESTING_DEPTH} levels`);
    kind = next === m ? "map" : "list";
    start = next + (kind === "map" ? MAP_STEP.length : LIST_STEP.length);
  }
}

interface Node {
  value?: string;
  subkeys?: Map<string, Node>;
  indices?: Map<number, Node>;
}

function child<K>(children: Map<K, Node>, key: K): Node {
  let node = children.get(key);
  if (node === undefined) {
    node = {};
    children.set(key, node);
  }
  return node;
}

/** Go's sort.Strings order: bytes, which for UTF-8 is code point order (not UTF-16 units). */
function compareCodePoints(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0) as number);
  const y = Array.from(b, (c) => c.codePointAt(0) as number);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return (x[i] as number) - (y[i] as number);
  }
  return x.length - y.length;
}

function convert(node: Node, path: string): Value {
  const kinds = Number(node.value !== undefined) + Number(node.subkeys !== undefined);
  if (kinds + Number(node.indices !== undefined) > 1) fail(`type mismatch at ${JSON.stringify(path)}`);
  if (node.value !== undefined) return str(node.value);
  if (node.indices !== undefined) {
    const items: Value[] = [];
    for (let i = 0; i < node.indices.size; i++) {
      const element = node.indices.get(i);
      if (element === undefined) fail(`incomplete list at ${JSON.stringify(path)}`);
      items.push(convert(element, path + LIST_STEP + i));
    }
    return { kind: "seq", items };
  }
  const keys = [...(node.subkeys?.keys() ?? [])].sort(compareCodePoints);
  const items: Entry[] = keys.map((key) =>
    entry(key, convert(node.subkeys?.get(key) as Node, path ? path + MAP_STEP + key : key)),
  );
  return mapping(items);
}

/** Rebuild the metadata tree from flattened names (prefix already removed), in any order. */
export function unflattenMetadata(pairs: Iterable<FlatPair>): Mapping {
  const root: Node = {};
  for (const [name, value] of pairs) {
    let node = root;
    for (const step of tokenize(name)) {
      if ("map" in step) {
        node.subkeys ??= new Map();
        node = child(node.subkeys, step.map);
      } else {
        node.indices ??= new Map();
        node = child(node.indices, step.list);
      }
    }
    if (node.value !== undefined) fail(`duplicate value for ${JSON.stringify(name)}`);
    node.value = value;
  }
  const tree = convert(root, "");
  // tokenize always starts with a map step, so the root is a mapping (or empty).
  return tree.kind === "map" ? tree : mapping([]);
}
