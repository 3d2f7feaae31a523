import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { scalarText } from "../../../../src/envelope/sops/codecs/flat-text.ts";
import type { FlatPair } from "../../../../src/envelope/sops/codecs/flatten.ts";
import { flattenMetadata, unflattenMetadata } from "../../../../src/envelope/sops/codecs/flatten.ts";
import type { Comment, Entry, Mapping, Value } from "../../../../src/envelope/sops/document.ts";
import { entry, mapping, str } from "../../../../src/envelope/sops/document.ts";

const seq = (items: (Value | Comment)[]): Value => ({ kind: "seq", items });
const int = (n: bigint): Value => ({ kind: "scalar", type: "int", value: n });
const bool = (b: boolean): Value => ({ kind: "scalar", type: "bool", value: b });

// A 3.13-shaped metadata tree (alphabetical at every level), two key groups and a KMS context.
const groupsTree: Mapping = mapping([
  entry(
    "key_groups",
    seq([
      mapping([
        entry(
          "age",
          seq([mapping([entry("enc", str("-----BEGIN AGE-----\nabc\n")), entry("recipient", str("age1x"))])]),
        ),
      ]),
      mapping([
        entry(
          "kms",
          seq([
            mapping([
              entry("arn", str("arn:aws:kms:eu-west-1:1:key/k")),
              entry("aws_profile", str("")),
              entry("context", mapping([entry("env", str("prod")), entry("tenant", str("t1"))])),
            ]),
          ]),
        ),
      ]),
    ]),
  ),
  entry("lastmodified", str("2026-01-01T00:00:00Z")),
  entry("mac_only_encrypted", bool(true)),
  entry("shamir_threshold", int(2n)),
  entry("version", str("3.13.2")),
]);

const groupsFlat: FlatPair[] = [
  ["sops_key_groups__list_0__map_age__list_0__map_enc", "-----BEGIN AGE-----\nabc\n"],
  ["sops_key_groups__list_0__map_age__list_0__map_recipient", "age1x"],
  ["sops_key_groups__list_1__map_kms__list_0__map_arn", "arn:aws:kms:eu-west-1:1:key/k"],
  ["sops_key_groups__list_1__map_kms__list_0__map_aws_profile", ""],
  ["sops_key_groups__list_1__map_kms__list_0__map_context__map_env", "prod"],
  ["sops_key_groups__list_1__map_kms__list_0__map_context__map_tenant", "t1"],
  ["sops_lastmodified", "2026-01-01T00:00:00Z"],
  ["sops_mac_only_encrypted", "true"],
  ["sops_shamir_threshold", "2"],
  ["sops_version", "3.13.2"],
];

/** What unflatten gives back: every scalar as its text (flat files only hold strings). */
function asStrings(v: Value): Value {
  if (v.kind === "map") {
    return mapping(v.items.flatMap((i) => (i.kind === "entry" ? [entry(i.key, asStrings(i.value))] : [])));
  }
  if (v.kind === "seq") return seq(v.items.flatMap((i) => (i.kind === "comment" ? [] : [asStrings(i)])));
  return str(scalarText(v));
}

function badInput(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof Error && "code" in e && e.code === "BAD_INPUT", String(e));
    assert.match(e.message, pattern);
    return true;
  });
}

describe("flattenMetadata", () => {
  it("walks depth first in the tree's order, with __map_/__list_ steps and the prefix", () => {
    assert.deepEqual(flattenMetadata(groupsTree, "sops_"), groupsFlat);
  });

  it("keeps the tree's order instead of sorting names (list 10 after list 2)", () => {
    const tree = mapping([
      entry("pgp", seq(Array.from({ length: 11 }, (_, i) => mapping([entry("fp", str(`F${i}`))])))),
    ]);
    const names = flattenMetadata(tree).map(([n]) => n);
    assert.equal(names[2], "pgp__list_2__map_fp");
    assert.equal(names[10], "pgp__list_10__map_fp");
  });

  it("skips comments and empty containers; comments take no list index", () => {
    const tree = mapping([
      { kind: "comment", text: "x" },
      entry("age", seq([])),
      entry("pgp", seq([{ kind: "comment", text: "c" }, mapping([entry("fp", str("A"))])])),
    ]);
    assert.deepEqual(flattenMetadata(tree), [["pgp__list_0__map_fp", "A"]]);
  });

  it("refuses two leaves that flatten to one name", () => {
    const tree = mapping([entry("a__map_b", str("1")), entry("a", mapping([entry("b", str("2"))]))]);
    badInput(() => flattenMetadata(tree), /collision/);
  });
});

describe("unflattenMetadata", () => {
  it("inverts flatten (values become str)", () => {
    const pairs = groupsFlat.map(([n, v]): FlatPair => [n.slice("sops_".length), v]);
    assert.deepEqual(unflattenMetadata(pairs), asStrings(groupsTree));
  });

  it("accepts any order (3.5 wrote Go map order): keys sorted, list entries by index", () => {
    const pairs: FlatPair[] = [
      ["version", "3.5.0"],
      ["pgp__list_1__map_fp", "D722"],
      ["mac", "ENC[x]"],
      ["pgp__list_0__map_fp", "FBC7"],
      ["pgp__list_1__map_enc", "B"],
      ["pgp__list_0__map_enc", "A"],
    ];
    const expected = mapping([
      entry("mac", str("ENC[x]")),
      entry(
        "pgp",
        seq([
          mapping([entry("enc", str("A")), entry("fp", str("FBC7"))]),
          mapping([entry("enc", str("B")), entry("fp", str("D722"))]),
        ]),
      ),
      entry("version", str("3.5.0")),
    ]);
    assert.deepEqual(unflattenMetadata(pairs), expected);
  });

  it("sorts keys by code point like Go, not by UTF-16 unit", () => {
    const tree = unflattenMetadata([
      ["\u{1F600}", "astral"],
      ["\uFF21", "fullwidth A"],
    ]);
    assert.deepEqual(
      tree.items.map((i) => (i.kind === "entry" ? i.key : "")),
      ["\uFF21", "\u{1F600}"],
    );
  });

  it("refuses gaps in a list, mixed kinds, duplicates and bad indices", () => {
    badInput(() => unflattenMetadata([["pgp__list_1__map_fp", "x"]]), /incomplete list/);
    badInput(
      () =>
        unflattenMetadata([
          ["pgp", "x"],
          ["pgp__list_0__map_fp", "y"],
        ]),
      /type mismatch/,
    );
    badInput(
      () =>
        unflattenMetadata([
          ["mac", "x"],
          ["mac", "y"],
        ]),
      /duplicate/,
    );
    badInput(() => unflattenMetadata([["pgp__list_x__map_fp", "y"]]), /bad list index/);
  });

  it("gives an empty mapping for no names", () => {
    assert.deepEqual(unflattenMetadata([]), mapping([]));
  });
});

// Keys as metadata uses them: no `__` inside (that would be read as a step), no edge `_`.
const keyArb = fc.stringMatching(/^[a-z][a-z0-9]{0,6}(_[a-z0-9]{1,6}){0,2}$/);
const textArb = fc.oneof(fc.string(), fc.string({ unit: "grapheme" }), fc.constant("line1\nline2\n"));

const treeArb = fc.letrec<{ map: Mapping; value: Value; list: Value }>((tie) => ({
  map: fc
    .uniqueArray(fc.tuple(keyArb, tie("value")), { minLength: 1, maxLength: 5, selector: ([k]) => k })
    .map((pairs) =>
      // Metadata trees arrive alphabetical; unflatten sorts, so only such trees round-trip exactly.
      mapping(
        [...pairs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]): Entry => entry(k, v)),
      ),
    ),
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    textArb.map((t) => str(t)),
    tie("map"),
    tie("list"),
  ),
  // sops lists hold key entries (maps); a list of strings (e.g. a context) is also legal.
  list: fc.oneof(
    fc.array(tie("map"), { minLength: 1, maxLength: 3 }).map((items) => seq(items)),
    fc.array(textArb, { minLength: 1, maxLength: 3 }).map((items) => seq(items.map((t) => str(t)))),
  ),
}));

describe("flatten/unflatten properties", () => {
  it("unflatten(flatten(tree)) is the tree, in any order of the flattened names", () => {
    fc.assert(
      fc.property(treeArb.map, fc.func(fc.integer()), (tree, rank) => {
        const flat = flattenMetadata(tree);
        assert.deepEqual(unflattenMetadata(flat), tree);
        const shuffled = [...flat].sort((a, b) => rank(a[0]) - rank(b[0]));
        assert.deepEqual(unflattenMetadata(shuffled), tree);
        // The prefix is only a prefix: every name carries it, and nothing else changes.
        const prefixed = flattenMetadata(tree, "sops_");
        assert.deepEqual(
          prefixed.map(([n, v]) => [n.slice(5), v]),
          flat,
        );
      }),
      { numRuns: 300 },
    );
  });
});
