/**
 * JSON output: layout, Go's string escaping and float format. The exact strings below are
 * what sops 3.13.2 printed for the same values (checked by hand with `sops decrypt`; the
 * fixture round trips in json-sops.test.ts check them live).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { jsonCodec } from "../../../../src/envelope/sops/codecs/json.ts";
import { escapeJsonString, formatGoFloat } from "../../../../src/envelope/sops/codecs/json-emit.ts";
import {
  comment,
  entry,
  type Mapping,
  mapping,
  str,
  type Value,
} from "../../../../src/envelope/sops/document.ts";
import { BootsealError } from "../../../../src/errors.ts";

const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);
const int = (value: bigint): Value => ({ kind: "scalar", type: "int", value });
const float = (value: number): Value => ({ kind: "scalar", type: "float", value });
const seq = (items: Value[]): Value => ({ kind: "seq", items });
const emit = (doc: Mapping, indent?: number | "\t"): string =>
  text(jsonCodec.emitPlain([doc], indent === undefined ? undefined : { indent }));

function fails(fn: () => unknown, code: string, message = /./): void {
  assert.throws(fn, (e: unknown) => e instanceof BootsealError && e.code === code && message.test(e.message));
}

describe("json emit: layout", () => {
  it("empty document, empty containers", () => {
    assert.equal(emit(mapping([])), "{}\n");
    assert.equal(
      emit(mapping([entry("o", mapping([])), entry("a", seq([])), entry("n", seq([seq([]), mapping([])]))])),
      '{\n\t"o": {},\n\t"a": [],\n\t"n": [\n\t\t[],\n\t\t{}\n\t]\n}\n',
    );
  });

  it("tab per level by default, N spaces on request, no indentation at 0", () => {
    const doc = mapping([entry("a", mapping([entry("b", seq([int(1n), str("x")]))]))]);
    assert.equal(emit(doc), '{\n\t"a": {\n\t\t"b": [\n\t\t\t1,\n\t\t\t"x"\n\t\t]\n\t}\n}\n');
    assert.equal(emit(doc, "\t"), emit(doc));
    assert.equal(emit(doc, 2), '{\n  "a": {\n    "b": [\n      1,\n      "x"\n    ]\n  }\n}\n');
    assert.equal(emit(doc, 0), '{\n"a": {\n"b": [\n1,\n"x"\n]\n}\n}\n');
  });

  it("refuses an indent below -1 (sops does too); -1 means the default tab", () => {
    fails(() => emit(mapping([]), -2), "USAGE");
    fails(() => emit(mapping([]), 1.5), "USAGE");
    assert.equal(emit(mapping([entry("a", int(1n))]), -1), '{\n\t"a": 1\n}\n');
  });

  it("drops comments, which JSON cannot carry; a container of comments only is empty", () => {
    const doc = mapping([comment(" top"), entry("a", { kind: "seq", items: [comment("c")] }), comment("x")]);
    assert.equal(emit(doc), '{\n\t"a": []\n}\n');
  });

  it("writes every scalar type", () => {
    const doc = mapping([
      entry("s", str("x")),
      entry("i", int(-9223372036854775808n)),
      entry("f", float(25.4)),
      entry("t", { kind: "scalar", type: "bool", value: true }),
      entry("F", { kind: "scalar", type: "bool", value: false }),
      entry("n", { kind: "scalar", type: "null" }),
      entry("time", { kind: "scalar", type: "time", value: "2024-01-01T00:00:00Z" }),
      // A Go []byte (decrypted type:bytes) is marshalled as base64.
      entry("b", { kind: "scalar", type: "bytes", value: new Uint8Array([0, 1, 0xff]) }),
    ]);
    assert.equal(
      emit(doc),
      '{\n\t"s": "x",\n\t"i": -9223372036854775808,\n\t"f": 25.4,\n\t"t": true,\n\t"F": false,\n\t"n": null,\n' +
        '\t"time": "2024-01-01T00:00:00Z",\n\t"b": "AAH/"\n}\n',
    );
  });

  it("keeps duplicate keys in order", () => {
    assert.equal(emit(mapping([entry("a", int(1n)), entry("a", int(2n))])), '{\n\t"a": 1,\n\t"a": 2\n}\n');
  });
});

describe("json emit: Go string escaping", () => {
  it("short escapes, \\u00XX for other controls, HTML and line separators escaped, DEL raw", () => {
    assert.equal(
      escapeJsonString('"\\/\b\f\n\r\t\u0000\u0001\u001f\u007f\u0080<>&\u2028\u2029é😀'),
      '"\\"\\\\/\\b\\f\\n\\r\\t\\u0000\\u0001\\u001f\u007f\u0080\\u003c\\u003e\\u0026\\u2028\\u2029é😀"',
    );
  });

  it("every ASCII character and U+2028/9, alone and inside a long plain value: escaped exactly when Go escapes it", () => {
    const escaped = (c: number) => c < 0x20 || [0x22, 0x5c, 0x3c, 0x3e, 0x26, 0x2028, 0x2029].includes(c);
    const pad = "A".repeat(300);
    for (const c of [...Array.from({ length: 0x80 }, (_, i) => i), 0x2028, 0x2029, 0xe9]) {
      const ch = String.fromCharCode(c);
      const alone = escapeJsonString(ch).slice(1, -1);
      assert.equal(alone !== ch, escaped(c), `U+${c.toString(16)}`);
      assert.equal(
        escapeJsonString(`${pad}${ch}${pad}`),
        `"${pad}${alone}${pad}"`,
        `U+${c.toString(16)} in a long value`,
      );
    }
  });

  it("keys are escaped the same way", () => {
    assert.equal(emit(mapping([entry("<k>\n", str(""))])), '{\n\t"\\u003ck\\u003e\\n": ""\n}\n');
  });

  it("bytes: valid UTF-8 as text, each invalid byte as the escape \\ufffd, valid U+FFFD raw", () => {
    const bytes = new Uint8Array([0x61, 0xff, 0xe2, 0x82, 0x3c, 0xef, 0xbf, 0xbd, 0xe2, 0x98, 0x83]);
    assert.equal(escapeJsonString(bytes), '"a\\ufffd\\ufffd\\ufffd\\u003c\ufffd☃"');
  });
});

describe("json emit: Go float64 format", () => {
  const cases: [number, string][] = [
    [1, "1"],
    [1.5, "1.5"],
    [-1.5, "-1.5"],
    [25.4, "25.4"],
    [0.1, "0.1"],
    [0.30000000000000004, "0.30000000000000004"],
    [1e20, "100000000000000000000"],
    [1e21, "1e+21"],
    [1.2345678901234569e23, "1.2345678901234569e+23"],
    [2 ** 63, "9223372036854776000"],
    [0.000001, "0.000001"],
    [1e-7, "1e-7"],
    [2.5e-10, "2.5e-10"],
    [5e-324, "5e-324"],
    [1.7976931348623157e308, "1.7976931348623157e+308"],
    [0, "0"],
    [-0, "-0"], // Go keeps the sign; String(-0) would not
  ];
  for (const [value, expected] of cases) {
    it(`${expected}`, () => assert.equal(formatGoFloat(value), expected));
  }

  it("refuses NaN and infinities, which Go's encoder cannot write", () => {
    for (const [v, go] of [
      [Number.NaN, "NaN"],
      [Number.POSITIVE_INFINITY, "\\+Inf"],
      [Number.NEGATIVE_INFINITY, "-Inf"],
    ] as const) {
      fails(
        () => emit(mapping([entry("f", float(v))])),
        "UNREPRESENTABLE",
        new RegExp(`^Error marshaling to json: Error encoding value : json: unsupported value: ${go}$`),
      );
    }
  });
});

describe("json codec: emitEncrypted", () => {
  const metadata = mapping([entry("version", str("3.13.2"))]);

  it("appends the metadata as the last member", () => {
    const out = text(jsonCodec.emitEncrypted([mapping([entry("a", str("ENC[x]"))])], metadata));
    assert.equal(out, '{\n\t"a": "ENC[x]",\n\t"sops": {\n\t\t"version": "3.13.2"\n\t}\n}\n');
  });

  it("metadata alone for an empty document", () => {
    assert.equal(
      text(jsonCodec.emitEncrypted([mapping([])], metadata)),
      '{\n\t"sops": {\n\t\t"version": "3.13.2"\n\t}\n}\n',
    );
  });

  it("refuses a user key named sops, and anything but one branch", () => {
    fails(() => jsonCodec.emitEncrypted([mapping([entry("sops", str("x"))])], metadata), "BAD_INPUT");
    fails(() => jsonCodec.emitEncrypted([mapping([]), mapping([])], metadata), "BAD_INPUT");
    fails(() => jsonCodec.emitPlain([]), "BAD_INPUT");
  });
});
