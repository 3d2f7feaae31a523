/**
 * Property tests: any tree the JSON codec can carry comes back unchanged through its own
 * output, duplicates and 64-bit integers included.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { jsonCodec } from "../../../../src/envelope/sops/codecs/json.ts";
import type { Entry, Mapping, Value } from "../../../../src/envelope/sops/document.ts";

const LONE_SURROGATE = /[\ud800-\udfff]/u;

/** Text a JSON file can hold: no lone UTF-16 surrogates (UTF-8 cannot encode them). */
const text = fc
  .oneof(
    fc.string({ unit: "binary", maxLength: 12 }),
    fc.constantFrom("", "<>&", "\u2028\u2029", "\u0000\b\f\n\r\t\u001f\u007f", '"\\/', "ENC[x]", "\ufffd"),
  )
  .filter((s) => !LONE_SURROGATE.test(s));

/** Few distinct keys, so that duplicates are common. */
const key = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom("a", "b", "10", "1", "") },
  { weight: 1, arbitrary: text },
);

/**
 * Floats that sops writes in a form it reads back as a float. An integral float in int64
 * range (1.0, -0.0) is written as "1"/"-0" and read back as an int, in sops as here; that
 * change is covered by the normalisation property below.
 */
const float = fc
  .double({ noNaN: true, noDefaultInfinity: true })
  .filter((x) => !(Number.isInteger(x) && x >= -(2 ** 63) && x < 2 ** 63));

const scalar: fc.Arbitrary<Value> = fc.oneof(
  text.map((value) => ({ kind: "scalar", type: "str", value }) as const),
  fc
    .bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })
    .map((value) => ({ kind: "scalar", type: "int", value }) as const),
  float.map((value) => ({ kind: "scalar", type: "float", value }) as const),
  fc.boolean().map((value) => ({ kind: "scalar", type: "bool", value }) as const),
  fc.constant({ kind: "scalar", type: "null" } as const),
);

const tree = fc.letrec<{ value: Value; mapping: Mapping }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    scalar,
    tie("mapping"),
    fc.array(tie("value"), { maxLength: 4 }).map((items) => ({ kind: "seq", items }) as const),
  ),
  mapping: fc
    .array(
      fc.tuple(key, tie("value")).map(([k, value]): Entry => ({ kind: "entry", key: k, value })),
      { maxLength: 5 },
    )
    .map((items) => ({ kind: "map", items }) as const),
}));

/** A plaintext top level: anything but a member named `sops`. */
const document = tree.mapping.filter((m) => m.items.every((i) => i.kind !== "entry" || i.key !== "sops"));

describe("json codec properties", () => {
  it("parsePlain(emitPlain(t)) == t, with any indent", () => {
    fc.assert(
      fc.property(
        document,
        fc.constantFrom<number | "\t" | undefined>(undefined, "\t", 0, 2, 4),
        (doc, indent) => {
          const out = jsonCodec.emitPlain([doc], { indent });
          assert.deepEqual(jsonCodec.parsePlain(out), [doc]);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("parseEncrypted(emitEncrypted(t, m)) == {t, m}", () => {
    fc.assert(
      fc.property(document, tree.mapping, (doc, metadata) => {
        const out = jsonCodec.emitEncrypted([doc], metadata);
        assert.deepEqual(jsonCodec.parseEncrypted(out), { branches: [doc], metadata });
      }),
      { numRuns: 200 },
    );
  });

  // Go writes the float 1.0 as "1" and -0.0 as "-0", which read back as the int 1 and the
  // int 0 ("0"): so one pass may change a float, and from the second pass on nothing changes.
  it("output settles after one re-read, for every finite float", () => {
    const anyFloat = fc
      .double({ noNaN: true, noDefaultInfinity: true })
      .map((value): Entry => ({ kind: "entry", key: "f", value: { kind: "scalar", type: "float", value } }));
    fc.assert(
      fc.property(fc.array(anyFloat, { maxLength: 8 }), (items) => {
        const once = jsonCodec.emitPlain([{ kind: "map", items }]);
        const twice = jsonCodec.emitPlain(jsonCodec.parsePlain(once));
        const thrice = jsonCodec.emitPlain(jsonCodec.parsePlain(twice));
        assert.deepEqual(thrice, twice);
        // Only the sign of zero may change in the second pass.
        const changed = new TextDecoder().decode(once) !== new TextDecoder().decode(twice);
        assert.equal(
          changed,
          items.some(
            (e) => e.value.kind === "scalar" && e.value.type === "float" && Object.is(e.value.value, -0),
          ),
        );
      }),
    );
  });
});
