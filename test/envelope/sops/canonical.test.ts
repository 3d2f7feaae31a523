import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import {
  formatGoFloat,
  formatRfc3339Seconds,
  formatTimeText,
  parseGoFloat,
  parseRfc3339,
  plaintextBytes,
  scalarFromPlaintext,
} from "../../../src/envelope/sops/canonical.ts";
import type { Scalar } from "../../../src/envelope/sops/document.ts";

const utf8 = new TextEncoder();
const text = (b: Uint8Array | null): string | null => (b === null ? null : new TextDecoder().decode(b));

describe("formatGoFloat: Go FormatFloat(v, 'f', -1, 64)", () => {
  // Expected strings from docs/sops-format.md section 2.2 and Go's strconv documentation.
  const cases: [number, string][] = [
    [1.5, "1.5"],
    [1.0, "1"],
    [1e21, "1000000000000000000000"],
    [1e22, "10000000000000000000000"],
    [1e-7, "0.0000001"],
    [1234568000, "1234568000"],
    [25.4, "25.4"],
    [0.1, "0.1"],
    [-2.5e-10, "-0.00000000025"],
    [123456789.125, "123456789.125"],
    [1.7976931348623157e308, `17976931348623157${"0".repeat(292)}`],
    [5e-324, `0.${"0".repeat(323)}5`],
    [-0, "-0"],
    [0, "0"],
    [Number.POSITIVE_INFINITY, "+Inf"],
    [Number.NEGATIVE_INFINITY, "-Inf"],
    [Number.NaN, "NaN"],
  ];
  for (const [v, want] of cases)
    test(`${v} -> ${want.length > 30 ? `${want.slice(0, 20)}…` : want}`, () => {
      assert.equal(formatGoFloat(v), want);
    });

  test("property: never an exponent, always round-trips, no trailing .0", () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (v) => {
        const out = formatGoFloat(v);
        assert.doesNotMatch(out, /[eE]/);
        assert.doesNotMatch(out, /\.\d*0$|\.$/);
        assert.ok(Object.is(Number(out), v) || (v === 0 && Number(out) === 0));
        assert.ok(Object.is(parseGoFloat(out), v));
        // Shortest: the same significant digits JavaScript chooses.
        const digits = (x: string): string =>
          x
            .replace(/^-/, "")
            .replace(/e.*$/, "")
            .replace(".", "")
            .replace(/^0+|0+$/g, "");
        assert.equal(digits(out), digits(String(v)));
      }),
      { numRuns: 2000 },
    );
  });
});

describe("plaintextBytes", () => {
  const cases: [Scalar, string | null][] = [
    [{ kind: "scalar", type: "bool", value: true }, "True"],
    [{ kind: "scalar", type: "bool", value: false }, "False"],
    [{ kind: "scalar", type: "int", value: -9223372036854775808n }, "-9223372036854775808"],
    [{ kind: "scalar", type: "int", value: 7n }, "7"],
    [{ kind: "scalar", type: "float", value: 1 }, "1"],
    [{ kind: "scalar", type: "time", value: "2024-01-01T00:00:00Z" }, "2024-01-01T00:00:00Z"],
    [{ kind: "scalar", type: "str", value: "héllo" }, "héllo"],
    [{ kind: "scalar", type: "null" }, null],
  ];
  for (const [s, want] of cases)
    test(`${s.type} -> ${want}`, () => assert.equal(text(plaintextBytes(s)), want));

  test("raw bytes stay raw", () => {
    const raw = new Uint8Array([0xff, 0x00, 0xfe]);
    assert.deepEqual(plaintextBytes({ kind: "scalar", type: "str", value: raw }), raw);
    assert.deepEqual(plaintextBytes({ kind: "scalar", type: "bytes", value: raw }), raw);
  });
});

describe("scalarFromPlaintext", () => {
  const p = (type: string, s: string): Scalar => scalarFromPlaintext(type, utf8.encode(s));

  test("bool accepts Go ParseBool's set", () => {
    for (const t of ["1", "t", "T", "TRUE", "true", "True"])
      assert.deepEqual(p("bool", t), { kind: "scalar", type: "bool", value: true });
    for (const f of ["0", "f", "F", "FALSE", "false", "False"])
      assert.deepEqual(p("bool", f), { kind: "scalar", type: "bool", value: false });
    for (const bad of ["yes", "tRUE", "", " true"])
      assert.throws(() => p("bool", bad), { code: "BAD_INPUT" });
  });

  test("int: Go Atoi with int64 range", () => {
    assert.deepEqual(p("int", "007"), { kind: "scalar", type: "int", value: 7n });
    assert.deepEqual(p("int", "+5"), { kind: "scalar", type: "int", value: 5n });
    assert.deepEqual(p("int", "9223372036854775807"), {
      kind: "scalar",
      type: "int",
      value: 9223372036854775807n,
    });
    for (const bad of ["9223372036854775808", "-9223372036854775809", "1_000", "0x10", "1.0", ""]) {
      assert.throws(() => p("int", bad), { code: "BAD_INPUT" }, bad);
    }
  });

  test("float: Go ParseFloat", () => {
    const v = (s: string): number => (p("float", s) as { value: number }).value;
    assert.equal(v("1.50"), 1.5);
    assert.equal(v("1e3"), 1000);
    assert.equal(v(".5"), 0.5);
    assert.equal(v("1."), 1);
    assert.equal(v("+Inf"), Number.POSITIVE_INFINITY);
    assert.equal(v("-infinity"), Number.NEGATIVE_INFINITY);
    assert.ok(Number.isNaN(v("NaN")));
    assert.equal(v("1e-400"), 0);
    for (const bad of ["1e400", "-nan", "0x1p-2", "1_0", "abc", ""])
      assert.throws(() => p("float", bad), { code: "BAD_INPUT" }, bad);
  });

  test("time: RFC 3339 re-formatted as Go MarshalText", () => {
    const v = (s: string): string => (p("time", s) as { value: string }).value;
    assert.equal(v("2024-01-01T00:00:00Z"), "2024-01-01T00:00:00Z");
    assert.equal(v("2024-01-01T00:00:00.500000000Z"), "2024-01-01T00:00:00.5Z");
    assert.equal(v("2024-01-01T00:00:00+00:00"), "2024-01-01T00:00:00Z");
    assert.equal(v("2024-05-06T07:08:09.120+02:00"), "2024-05-06T07:08:09.12+02:00");
    assert.equal(v("2024-01-01T00:00:00.1234567891Z"), "2024-01-01T00:00:00.123456789Z");
    for (const bad of [
      "2024-01-01",
      "2023-02-29T00:00:00Z",
      "2024-01-01T24:00:00Z",
      "2024-01-01T00:00:60Z",
      "2024-01-01 00:00:00Z",
    ]) {
      assert.throws(() => p("time", bad), { code: "BAD_INPUT" }, bad);
    }
  });

  test("str decodes UTF-8 (keeping a BOM) and keeps anything else as bytes", () => {
    assert.deepEqual(p("str", "\uFEFFhi"), { kind: "scalar", type: "str", value: "\uFEFFhi" });
    const raw = new Uint8Array([0x80, 0x41]);
    assert.deepEqual(scalarFromPlaintext("str", raw), { kind: "scalar", type: "str", value: raw });
    assert.deepEqual(scalarFromPlaintext("bytes", raw), { kind: "scalar", type: "bytes", value: raw });
  });

  test("unknown datatype", () => {
    assert.throws(() => p("comment", "x"), { code: "BAD_INPUT", message: "Unknown datatype" });
    assert.throws(() => p("string", "x"), { code: "BAD_INPUT" });
  });

  test("property: parse(plaintextBytes(x)) gives x back for every scalar type", () => {
    const scalar = fc.oneof(
      fc.string().map((value): Scalar => ({ kind: "scalar", type: "str", value })),
      fc
        .bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })
        .map((value): Scalar => ({ kind: "scalar", type: "int", value })),
      fc.double({ noNaN: true }).map((value): Scalar => ({ kind: "scalar", type: "float", value })),
      fc.boolean().map((value): Scalar => ({ kind: "scalar", type: "bool", value })),
    );
    fc.assert(
      fc.property(scalar, (s) => {
        const bytes = plaintextBytes(s)!;
        assert.deepEqual(scalarFromPlaintext(s.type, bytes), s);
      }),
    );
  });
});

describe("RFC 3339 helpers", () => {
  test("second-precision formatting keeps non-zero offsets and drops fractions", () => {
    const f = (s: string): string => formatRfc3339Seconds(parseRfc3339(s)!);
    assert.equal(f("2024-01-01T10:00:00.5Z"), "2024-01-01T10:00:00Z");
    assert.equal(f("2024-01-01T10:00:00+00:00"), "2024-01-01T10:00:00Z");
    assert.equal(f("2024-01-01T10:00:00-05:30"), "2024-01-01T10:00:00-05:30");
    assert.equal(parseRfc3339("2024-01-01T10:00:00+24:00"), null);
    assert.equal(
      formatTimeText(parseRfc3339("2024-02-29T23:59:59.000000001-00:00")!),
      "2024-02-29T23:59:59.000000001Z",
    );
  });
});
