import assert from "node:assert/strict";
import { test } from "node:test";
import { parseSetValue, parseTreePath, sameNode, setPath, unsetPath } from "../../src/cli/tree-path.ts";
import type { Entry, Mapping, Value } from "../../src/envelope/sops/document.ts";
import { isBootsealError } from "../../src/errors.ts";

const str = (value: string): Value => ({ kind: "scalar", type: "str", value });
const int = (n: number): Value => ({ kind: "scalar", type: "int", value: BigInt(n) });
const doc = (): Mapping => ({
  kind: "map",
  items: [
    { kind: "entry", key: "a", value: int(1) },
    { kind: "comment", text: " c" },
    {
      kind: "entry",
      key: "list",
      value: { kind: "seq", items: [str("x"), { kind: "comment", text: " in list" }, str("y")] },
    },
  ],
});

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return isBootsealError(err) ? err.code : "not a BootsealError";
  }
  return undefined;
}

test("parseTreePath: sops's syntax, quotes stripped without escapes, Atoi indices", () => {
  assert.deepEqual(parseTreePath(`["a"]["b"][0]`), ["a", "b", 0]);
  assert.deepEqual(parseTreePath(`['a'][+3][-1]`), ["a", 3, -1]);
  // sops drops the first and last character of a quoted piece and knows no escapes.
  assert.deepEqual(parseTreePath(`["a\\"]`), ["a\\"]);
  assert.deepEqual(parseTreePath(""), []);
  for (const bad of [`x["a"]`, `["a"] ["b"]`, `[a]`, `[]`, `["a"`, `[1.5]`]) {
    assert.equal(
      code(() => parseTreePath(bad)),
      "USAGE",
      bad,
    );
  }
});

test("parseSetValue: top-level numbers are floats (Go float64), objects go through the JSON codec", () => {
  assert.deepEqual(parseSetValue("1"), { kind: "scalar", type: "float", value: 1 });
  assert.deepEqual(parseSetValue(`"t"`), str("t"));
  assert.deepEqual(parseSetValue("true"), { kind: "scalar", type: "bool", value: true });
  assert.deepEqual(parseSetValue("null"), { kind: "scalar", type: "null" });
  const obj = parseSetValue(`{"n": 2, "f": 2.5}`);
  assert.equal(obj.kind, "map");
  const items = obj.kind === "map" ? obj.items : [];
  assert.deepEqual(
    items.map((i) => (i.kind === "entry" && i.value.kind === "scalar" ? [i.key, i.value.type] : null)),
    [
      ["n", "int"],
      ["f", "float"],
    ],
  );
  // The code is sops's "invalid set format" class (exit 7); the message names the problem.
  for (const bad of ["[1,2]", "{bad", "1e400", ""]) {
    assert.throws(
      () => parseSetValue(bad),
      (e) => isBootsealError(e) && /--set/.test(e.message),
      bad,
    );
  }
});

test("setPath: replace, add, create nested, append past the end; changed as sops reports it", () => {
  const one = setPath(doc(), ["a"], int(1));
  assert.equal(one.changed, false);
  // 1 (int) and 1.0 (float) differ, as Go's == on interface values says.
  assert.equal(setPath(doc(), ["a"], parseSetValue("1")).changed, true);
  const nested = setPath(doc(), ["new", "deep", 0], str("v"));
  assert.equal(nested.changed, true);
  assert.ok(
    sameNode(nested.branch.items[3] as Entry, {
      kind: "entry",
      key: "new",
      value: {
        kind: "map",
        items: [{ kind: "entry", key: "deep", value: { kind: "seq", items: [str("v")] } }],
      },
    }),
  );
  // List indices count comments, as sops's []interface{} holds them.
  const list = setPath(doc(), ["list", 2], str("z")).branch.items[2];
  assert.ok(list?.kind === "entry" && list.value.kind === "seq");
  assert.deepEqual(list.value.items[2], str("z"));
  const appended = setPath(doc(), ["list", 9], str("end")).branch.items[2];
  assert.ok(appended?.kind === "entry" && appended.value.kind === "seq" && appended.value.items.length === 4);
  // A path through a scalar replaces it.
  const through = setPath(doc(), ["a", "b"], str("v")).branch.items[0];
  assert.ok(through?.kind === "entry" && through.value.kind === "map");
  assert.equal(
    code(() => setPath(doc(), ["list", "k"], str("v"))),
    "USAGE",
  );
  assert.equal(
    code(() => setPath(doc(), [], str("v"))),
    "USAGE",
  );
});

test("unsetPath: removes keys and items; missing ones are NOT_FOUND, paths through scalars are not", () => {
  const removed = unsetPath(doc(), ["a"]);
  assert.equal(removed.items.length, 2);
  const item = unsetPath(doc(), ["list", 0]).items[2];
  assert.ok(item?.kind === "entry" && item.value.kind === "seq" && item.value.items.length === 2);
  assert.equal(
    code(() => unsetPath(doc(), ["zz"])),
    "NOT_FOUND",
  );
  assert.equal(
    code(() => unsetPath(doc(), ["list", 3])),
    "NOT_FOUND",
  );
  assert.equal(
    code(() => unsetPath(doc(), ["a", "b"])),
    "BAD_INPUT",
  );
  // The input tree is never modified.
  const d = doc();
  unsetPath(d, ["a"]);
  assert.equal(d.items.length, 3);
});
