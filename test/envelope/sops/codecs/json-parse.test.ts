/**
 * The JSON reader: order, duplicates, Go's number and string rules, and refusals with a place.
 * Expected values were checked against the real sops 3.13.2 (see json-sops.test.ts for the
 * live cross-checks).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { jsonCodec } from "../../../../src/envelope/sops/codecs/json.ts";
import { MAX_JSON_DEPTH, parseJsonDocument } from "../../../../src/envelope/sops/codecs/json-tokens.ts";
import type { Mapping, Value } from "../../../../src/envelope/sops/document.ts";
import { BootsealError } from "../../../../src/errors.ts";

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
const parse = (s: string | Uint8Array): Mapping => parseJsonDocument(typeof s === "string" ? utf8(s) : s);

function member(doc: Mapping, key: string): Value {
  const e = doc.items.find((i) => i.kind === "entry" && i.key === key);
  assert.ok(e && e.kind === "entry", `no key ${key}`);
  return e.value;
}

function badInput(fn: () => unknown, where?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof BootsealError, String(err));
    assert.equal(err.code, "BAD_INPUT");
    if (where) assert.match(err.message, where);
    return true;
  });
}

describe("json parse: structure", () => {
  it("keeps member order, integer-like keys and duplicates", () => {
    const doc = parse('{"b": 1, "10": 2, "a": 3, "1": 4, "a": {"x": 1, "x": 2}}');
    assert.deepEqual(
      doc.items.map((i) => (i.kind === "entry" ? i.key : "#")),
      ["b", "10", "a", "1", "a"],
    );
    const last = doc.items[4];
    assert.ok(last?.kind === "entry" && last.value.kind === "map");
    assert.deepEqual(
      last.value.items.map((i) => (i.kind === "entry" ? i.key : "#")),
      ["x", "x"],
    );
  });

  it("reads arrays of arrays, empty containers, literals", () => {
    const doc = parse(' \r\n\t{"m": [[1, []], [{}], [null, true, false]], "e": {}, "n": null}\n ');
    assert.deepEqual(member(doc, "m"), {
      kind: "seq",
      items: [
        {
          kind: "seq",
          items: [
            { kind: "scalar", type: "int", value: 1n },
            { kind: "seq", items: [] },
          ],
        },
        { kind: "seq", items: [{ kind: "map", items: [] }] },
        {
          kind: "seq",
          items: [
            { kind: "scalar", type: "null" },
            { kind: "scalar", type: "bool", value: true },
            { kind: "scalar", type: "bool", value: false },
          ],
        },
      ],
    });
    assert.deepEqual(member(doc, "e"), { kind: "map", items: [] });
    assert.deepEqual(member(doc, "n"), { kind: "scalar", type: "null" });
  });

  it(`accepts nesting up to ${MAX_JSON_DEPTH} levels and refuses one more`, () => {
    const nested = (arrays: number) => `{"a": ${"[".repeat(arrays)}${"]".repeat(arrays)}}`;
    assert.equal(parse(nested(MAX_JSON_DEPTH - 1)).items.length, 1);
    badInput(() => parse(nested(MAX_JSON_DEPTH)), /nesting too deep/);
  });
});

describe("json parse: numbers follow sops 3.13.2 (int64 -> int, else float)", () => {
  const cases: [string, "int" | "float", bigint | number][] = [
    ["0", "int", 0n],
    ["-0", "int", 0n], // Go's ParseInt accepts "-0"
    ["42", "int", 42n],
    ["9007199254740993", "int", 9007199254740993n], // beyond 2^53, exact
    ["9223372036854775807", "int", 9223372036854775807n],
    ["-9223372036854775808", "int", -9223372036854775808n],
    ["9223372036854775808", "float", 2 ** 63],
    ["-9223372036854775809", "float", -(2 ** 63)],
    ["123456789012345678901234567890", "float", 1.2345678901234568e29],
    ["1.0", "float", 1],
    ["1.5", "float", 1.5],
    ["1e2", "float", 100],
    ["1E+2", "float", 100],
    ["2.5e-10", "float", 2.5e-10],
    ["1e-400", "float", 0], // underflow is not an error in Go
    ["25.4", "float", 25.4],
  ];
  for (const [text, type, value] of cases) {
    it(`${text} -> ${type}`, () => {
      assert.deepEqual(member(parse(`{"n": ${text}}`), "n"), { kind: "scalar", type, value });
    });
  }

  it("-0.0 is a negative-zero float", () => {
    const v = member(parse('{"n": -0.0}'), "n");
    assert.ok(v.kind === "scalar" && v.type === "float");
    assert.ok(Object.is(v.value, -0));
  });

  it("refuses a float beyond float64 range, as Go's ParseFloat does", () => {
    badInput(() => parse('{"n": 1e400}'), /out of range at line 1, column 7/);
    badInput(() => parse(`{"n": -${"9".repeat(400)}}`), /out of range/);
  });
});

describe("json parse: strings follow Go's decoder", () => {
  const str = (json: string | Uint8Array): unknown => {
    const v = member(parse(json), "s");
    assert.ok(v.kind === "scalar" && v.type === "str");
    return v.value;
  };

  it("decodes every escape", () => {
    assert.equal(
      str(String.raw`{"s": "\" \\ \/ \b \f \n \r \t \u0041\u00e9\u00E9 \u2028"}`),
      '" \\ / \b \f \n \r \t Aéé \u2028',
    );
  });

  it("pairs surrogate escapes and turns lone ones into U+FFFD", () => {
    assert.equal(str(String.raw`{"s": "\ud83d\ude00"}`), "😀");
    assert.equal(str(String.raw`{"s": "\ud800z"}`), "\ufffdz");
    assert.equal(str(String.raw`{"s": "\udc00\ud800\udc00"}`), "\ufffd\u{10000}");
    assert.equal(str(String.raw`{"s": "\ud800\ud800\udc00"}`), "\ufffd\u{10000}");
    assert.equal(str(String.raw`{"s": "\ud800\u0041"}`), "\ufffdA");
    assert.equal(str(String.raw`{"s": "\ud800"}`), "\ufffd");
  });

  it("keeps raw UTF-8 and replaces each invalid byte with U+FFFD, one per byte like Go", () => {
    // ff | e2 82 (truncated) | ed a0 80 (surrogate) | c0 af (overlong) | f4 90 80 80 (> U+10FFFF)
    const bytes = new Uint8Array([
      ...utf8('{"s": "a'),
      0xff,
      0x62,
      0xe2,
      0x82,
      0x63,
      0xed,
      0xa0,
      0x80,
      0x64,
      0xc0,
      0xaf,
      0x65,
      0xf4,
      0x90,
      0x80,
      0x80,
      ...utf8('f ☃ 🎉 \u2028"}'),
    ]);
    const R = "\ufffd";
    assert.equal(str(bytes), `a${R}b${R}${R}c${R}${R}${R}d${R}${R}e${R}${R}${R}${R}f ☃ 🎉 \u2028`);
  });

  it("accepts DEL and non-ASCII raw, but not raw control characters", () => {
    assert.equal(str('{"s": "\u007f\u0080"}'), "\u007f\u0080");
    badInput(() => parse('{"s": "a\u0001"}'), /control character in string at line 1, column 9/);
    badInput(() => parse('{"s": "a\nb"}'), /control character/);
  });
});

describe("json parse: malformed input is BAD_INPUT with line and column", () => {
  const cases: [string, string | Uint8Array, RegExp][] = [
    ["empty", "", /empty document at line 1, column 1/],
    ["whitespace only", " \n ", /empty document at line 2, column 2/],
    ["top-level array", "[1, 2]", /top level must be an object at line 1, column 1/],
    ["top-level string", '"x"', /top level must be an object/],
    ["top-level number", "  42", /top level must be an object at line 1, column 3/],
    [
      "byte order mark",
      new Uint8Array([0xef, 0xbb, 0xbf, ...utf8('{"a": 1}')]),
      /top level must be an object/,
    ],
    ["trailing garbage", '{"a": 1} x', /after the top-level object at line 1, column 10/],
    ["second document", '{"a": 1}\n{"b": 2}', /after the top-level object at line 2, column 1/],
    ["unterminated object", '{"a": 1', /unterminated object/],
    ["unterminated string", '{"a": "x', /unterminated string/],
    ["unterminated array", '{"a": [1', /unterminated array/],
    ["bad literal", '{\n  "a": 1,\n  "b": tru\n}', /invalid literal at line 3, column 11/],
    ["invalid escape", '{"a": "\\q"}', /invalid escape in string at line 1, column 9/],
    ["short \\u escape", '{"a": "\\u12"}', /invalid \\u escape/],
    ["leading zero", '{"a": 01}', /expected ',' or '}' at line 1, column 8/],
    ["bare fraction", '{"a": .5}', /unexpected character/],
    ["dangling point", '{"a": 1.}', /invalid number/],
    ["dangling exponent", '{"a": 1e}', /invalid number/],
    ["lone minus", '{"a": -}', /invalid number/],
    ["plus sign", '{"a": +1}', /unexpected character/],
    ["NaN", '{"a": NaN}', /unexpected character/],
    ["trailing comma in object", '{"a": 1,}', /expected a key/],
    ["trailing comma in array", '{"a": [1,]}', /unexpected character/],
    ["missing colon", '{"a" 1}', /expected ':'/],
    ["single quotes", "{'a': 1}", /expected a key/],
    ["comment", '{"a": 1 // c\n}', /expected ',' or '}'/],
    ["non-string key", "{1: 2}", /expected a key/],
  ];
  for (const [name, input, message] of cases) {
    it(name, () => badInput(() => parse(input), message));
  }

  it("never echoes the input in the message", () => {
    badInput(() => parse('{"password": "hunter2" x}'), /^json: expected ',' or '}' at line 1, column 24$/);
  });
});

describe("json codec: the sops member", () => {
  it("parsePlain refuses a document with a top-level sops member", () => {
    assert.throws(
      () => jsonCodec.parsePlain(utf8('{"a": 1, "sops": {}}')),
      (e: unknown) => e instanceof BootsealError && e.code === "ALREADY_ENCRYPTED",
    );
    // Only the top level counts.
    assert.equal(jsonCodec.parsePlain(utf8('{"a": {"sops": 1}}')).length, 1);
  });

  it("parseEncrypted splits the sops member off wherever it is", () => {
    const { branches, metadata } = jsonCodec.parseEncrypted(
      utf8('{"a": 1, "sops": {"version": "3.13.2"}, "b": 2}'),
    );
    assert.deepEqual(
      branches[0]?.items.map((i) => (i.kind === "entry" ? i.key : "#")),
      ["a", "b"],
    );
    assert.deepEqual(metadata, {
      kind: "map",
      items: [{ kind: "entry", key: "version", value: { kind: "scalar", type: "str", value: "3.13.2" } }],
    });
  });

  it("parseEncrypted: no sops -> NOT_ENCRYPTED; duplicate or non-object sops -> BAD_INPUT", () => {
    assert.throws(
      () => jsonCodec.parseEncrypted(utf8('{"a": 1}')),
      (e: unknown) => e instanceof BootsealError && e.code === "NOT_ENCRYPTED",
    );
    badInput(() => jsonCodec.parseEncrypted(utf8('{"sops": {}, "sops": {}}')), /duplicate/);
    badInput(() => jsonCodec.parseEncrypted(utf8('{"sops": "x"}')), /not an object/);
    badInput(() => jsonCodec.parseEncrypted(utf8('{"sops": {}')), /unterminated object/);
  });
});
