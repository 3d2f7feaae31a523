/**
 * Property: any tree of str/int/float/bool/null/time values and comments that sops could hold
 * survives emitPlain then parsePlain unchanged. The generator keeps to trees go-yaml itself
 * round-trips: integral floats print as ints in Go ("1"), an inline comment belongs before a
 * scalar, and a collection in a sequence has its leading comments written above its dash.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { yamlCodec } from "../../../../src/envelope/sops/codecs/yaml.ts";
import type {
  Branch,
  Comment,
  Entry,
  Mapping,
  Sequence,
  Value,
} from "../../../../src/envelope/sops/document.ts";

const textChar = fc.constantFrom(..."ab Z09:#-'\"\\{[*!._é日😀,?&|>%@`".split(""), "\n");
// A multi-line string starting with a space or newline gets a literal block with an indentation
// indicator, which go-yaml miscomputes inside sequences (sops writes a file it cannot read).
const text = fc
  .array(textChar, { maxLength: 12 })
  .map((cs) => cs.join(""))
  .filter((s) => !(s.includes("\n") && /^[ \n]/.test(s)));
const keyText = fc
  .array(fc.constantFrom(..."abz09 :#-'\"._é".split("")), { minLength: 1, maxLength: 10 })
  .map((cs) => cs.join(""))
  .filter((k) => k !== "sops" && k !== "<<");
const commentText = fc
  .array(fc.constantFrom(..." abc#é-:".split("")), { maxLength: 8 })
  .map((cs) => cs.join(""));

const scalar: fc.Arbitrary<Value> = fc.oneof(
  text.map((value) => ({ kind: "scalar", type: "str", value }) as const),
  fc
    .bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })
    .map((value) => ({ kind: "scalar", type: "int", value }) as const),
  fc
    .double()
    .filter((v) => !Number.isFinite(v) || !Number.isInteger(v))
    .map((value) => ({ kind: "scalar", type: "float", value }) as const),
  fc.boolean().map((value) => ({ kind: "scalar", type: "bool", value }) as const),
  fc.constant({ kind: "scalar", type: "null" } as const),
  fc
    .date({
      min: new Date("1970-01-01T00:00:00Z"),
      max: new Date("2999-12-31T23:59:59Z"),
      noInvalidDate: true,
    })
    .map(
      (d) =>
        ({
          kind: "scalar",
          type: "time",
          value: d.toISOString().replace(/\.(\d*?)0*Z$/, (_, f: string) => (f ? `.${f}Z` : "Z")),
        }) as const,
    ),
);

/** go-yaml writes the leading comments of a collection that is a sequence item above its dash. */
function withoutLeadingComments(v: Value): Value {
  if (v.kind === "scalar") return v;
  const first = v.items.findIndex((i) => i.kind !== "comment");
  const items = first < 0 ? [] : v.items.slice(first);
  if (v.kind === "map") return { kind: "map", items: items as (Entry | Comment)[] };
  return { kind: "seq", items: items as (Value | Comment)[] };
}

const headComment = commentText.map((t): Comment => ({ kind: "comment", text: t }));
const inlineComment = commentText.map((t): Comment => ({ kind: "comment", text: t, inline: true }));

const { tree } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    scalar,
    tie("map"),
    tie("seq"),
  ) as fc.Arbitrary<Value>,
  map: fc
    .uniqueArray(
      fc.tuple(
        keyText,
        tie("value") as fc.Arbitrary<Value>,
        fc.option(headComment),
        fc.option(inlineComment),
      ),
      {
        selector: (t) => t[0],
        maxLength: 4,
      },
    )
    .map((entries): Mapping => {
      const items: (Entry | Comment)[] = [];
      for (const [key, value, head, inline] of entries) {
        if (head) items.push(head);
        if (inline && value.kind === "scalar") items.push(inline);
        items.push({ kind: "entry", key, value });
      }
      return { kind: "map", items };
    }),
  seq: fc
    .array(fc.tuple(tie("value") as fc.Arbitrary<Value>, fc.option(headComment), fc.option(inlineComment)), {
      maxLength: 4,
    })
    .map((elements): Sequence => {
      const items: (Value | Comment)[] = [];
      for (const [value, head, inline] of elements) {
        if (head) items.push(head);
        if (inline && value.kind === "scalar") items.push(inline);
        items.push(withoutLeadingComments(value));
      }
      return { kind: "seq", items };
    }),
  tree: fc.array(tie("map") as fc.Arbitrary<Mapping>, { minLength: 1, maxLength: 3 }),
}));

test("parsePlain(emitPlain(tree)) gives the tree back", () => {
  fc.assert(
    fc.property(tree, (branches: Branch[]) => {
      const bytes = yamlCodec.emitPlain(branches);
      assert.deepStrictEqual(yamlCodec.parsePlain(bytes), branches);
    }),
    { numRuns: 1000 },
  );
});
