/** Small tree accessors and error checks shared by the flat codecs' tests. */
import assert from "node:assert/strict";
import type { Branch, Value } from "../../../../src/envelope/sops/document.ts";

function get(map: Value | undefined, key: string): Value | undefined {
  assert.ok(map?.kind === "map", `expected a mapping above ${key}`);
  for (const item of map.items) if (item.kind === "entry" && item.key === key) return item.value;
  return undefined;
}

/** The str value at a path of mapping keys and list indices (comments count as indices). */
export function strAt(root: Value | undefined, ...path: (string | number)[]): string | Uint8Array {
  let node = root;
  for (const step of path) {
    if (typeof step === "number") {
      assert.ok(node?.kind === "seq", `expected a list at ${step}`);
      const item = node.items[step];
      node = item?.kind === "comment" ? undefined : item;
    } else {
      node = get(node, step);
    }
  }
  assert.ok(node?.kind === "scalar" && node.type === "str", `no str at ${path.join(".")}`);
  return node.value;
}

/** A mapping's items as text: keys as-is, comments as `#text`. */
export function itemsOf(map: Value | undefined): string[] {
  assert.ok(map?.kind === "map");
  return map.items.map((i) => (i.kind === "entry" ? i.key : `#${i.text}`));
}

export function sectionOf(branch: Branch | undefined, name: string): Value {
  const value = branch === undefined ? undefined : get(branch, name);
  assert.ok(value, `no section ${name}`);
  return value;
}

export function assertCode(fn: () => unknown, code: string, pattern?: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof Error && "code" in e, String(e));
    assert.equal(e.code, code);
    if (pattern) assert.match(e.message, pattern);
    return true;
  });
}
