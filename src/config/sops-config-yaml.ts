/**
 * A small typed view of a parsed `.sops.yaml` that keeps each scalar's source text, and
 * the conversions sops's Go YAML decoder applies to the fields it reads.
 */
import { type Document, isAlias, isMap, isScalar, isSeq } from "yaml";
import { BootsealError } from "../errors.ts";

export type Tree =
  | { readonly t: "map"; readonly m: ReadonlyMap<string, Tree> }
  | { readonly t: "seq"; readonly items: readonly Tree[] }
  | { readonly t: "scalar"; readonly value: unknown; readonly text: string };

export function toTree(node: unknown, doc: Document, depth = 0): Tree {
  if (depth > 64) throw bad("config nests too deeply");
  // Aliases (`*name`) read the anchored node, as go-yaml does.
  const n = isAlias(node) ? node.resolve(doc) : node;
  if (isMap(n)) {
    const m = new Map<string, Tree>();
    for (const pair of n.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      m.set(key, toTree(pair.value, doc, depth + 1));
    }
    return { t: "map", m };
  }
  if (isSeq(n)) return { t: "seq", items: n.items.map((item) => toTree(item, doc, depth + 1)) };
  if (isScalar(n)) return { t: "scalar", value: n.value, text: n.source ?? String(n.value) };
  return { t: "scalar", value: null, text: "" };
}

export function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", message);
}

export const isNull = (v: Tree | undefined): boolean =>
  v === undefined || (v.t === "scalar" && v.value === null);

/** A scalar decoded into a Go string: YAML strings as they are, other scalars as written. */
export function str(v: Tree | undefined, what: string): string | undefined {
  if (isNull(v)) return undefined;
  if (v?.t !== "scalar") throw bad(`${what} must be a string`);
  return typeof v.value === "string" ? v.value : v.text;
}

export function int(v: Tree | undefined, what: string): number | undefined {
  if (isNull(v)) return undefined;
  if (v?.t !== "scalar" || typeof v.value !== "number" || !Number.isSafeInteger(v.value)) {
    throw bad(`${what} must be an integer`);
  }
  return v.value;
}

/** go-yaml v3 accepts the YAML 1.1 spellings when the target is a bool. */
export function bool(v: Tree | undefined, what: string): boolean {
  if (isNull(v)) return false;
  if (v?.t === "scalar" && typeof v.value === "boolean") return v.value;
  const text = v?.t === "scalar" && typeof v.value === "string" && v.text === v.value ? v.value : "";
  if (/^(y|Y|yes|Yes|YES|on|On|ON)$/.test(text)) return true;
  if (/^(n|N|no|No|NO|off|Off|OFF)$/.test(text)) return false;
  throw bad(`${what} must be a boolean`);
}

export function map(v: Tree | undefined, what: string): ReadonlyMap<string, Tree> {
  if (isNull(v)) return new Map();
  if (v?.t !== "map") throw bad(`${what} must be a mapping`);
  return v.m;
}

export function seq(v: Tree | undefined, what: string): readonly Tree[] {
  if (isNull(v)) return [];
  if (v?.t !== "seq") throw bad(`${what} must be a list`);
  return v.items;
}

/** A shorthand key field: a comma-separated string or a list of strings (parseKeyField). */
export function keyList(v: Tree | undefined, what: string): string[] {
  if (isNull(v)) return [];
  let parts: string[];
  if (v?.t === "scalar" && typeof v.value === "string") {
    parts = v.value.split(",").map((s) => s.trim());
    parts = parts.filter((s) => s !== "");
  } else if (v?.t === "seq") {
    // List items are joined with "," and split again by the key constructors, so an item may itself hold a list.
    parts = v.items.flatMap((item) => {
      if (item.t !== "scalar" || typeof item.value !== "string")
        throw bad(`${what}: expected string in list`);
      return item.value.split(",");
    });
  } else {
    throw bad(`${what} must be a string or a list of strings`);
  }
  return parts;
}
