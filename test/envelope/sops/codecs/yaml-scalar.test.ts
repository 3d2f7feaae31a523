/**
 * Plain-scalar typing as go-yaml v3 (and so sops) does it. Every expectation here was checked
 * against go-yaml v3.0.4 through sops' own YAML store (LoadPlainFile), not against the spec.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { yamlCodec } from "../../../../src/envelope/sops/codecs/yaml.ts";
import {
  canUsePlain,
  formatGoFloat,
  resolvePlain,
} from "../../../../src/envelope/sops/codecs/yaml-scalar.ts";
import type { Scalar } from "../../../../src/envelope/sops/document.ts";

type Want = ["str" | "time", string] | ["int", bigint] | ["float", number] | ["bool", boolean] | ["null"];

const TABLE: [string, Want][] = [
  ["true", ["bool", true]],
  ["True", ["bool", true]],
  ["TRUE", ["bool", true]],
  ["tRue", ["str", "tRue"]],
  ["false", ["bool", false]],
  ["yes", ["str", "yes"]],
  ["no", ["str", "no"]],
  ["on", ["str", "on"]],
  ["off", ["str", "off"]],
  ["y", ["str", "y"]],
  ["null", ["null"]],
  ["Null", ["null"]],
  ["NULL", ["null"]],
  ["~", ["null"]],
  ["nULL", ["str", "nULL"]],
  ["0", ["int", 0n]],
  ["-0", ["int", 0n]],
  ["+12", ["int", 12n]],
  ["1_000", ["int", 1000n]],
  ["0x1F", ["int", 31n]],
  ["0X1f", ["int", 31n]],
  ["-0x1F", ["int", -31n]],
  ["0o17", ["int", 15n]],
  ["017", ["int", 15n]],
  ["0b101", ["int", 5n]],
  ["08", ["float", 8]],
  ["09.5", ["float", 9.5]],
  ["9223372036854775807", ["int", 9223372036854775807n]],
  ["-9223372036854775808", ["int", -9223372036854775808n]],
  ["99999999999999999999", ["float", 1e20]],
  ["1.5", ["float", 1.5]],
  ["1.0", ["float", 1]],
  ["-1.5e3", ["float", -1500]],
  ["1e3", ["float", 1000]],
  ["1E-2", ["float", 0.01]],
  [".5", ["float", 0.5]],
  [".5_5", ["float", 0.55]],
  ["._5", ["str", "._5"]],
  [".inf", ["float", Number.POSITIVE_INFINITY]],
  ["-.inf", ["float", Number.NEGATIVE_INFINITY]],
  ["+.INF", ["float", Number.POSITIVE_INFINITY]],
  [".NaN", ["float", Number.NaN]],
  [".nan", ["float", Number.NaN]],
  ["1_0.5", ["float", 10.5]],
  ["1e999", ["str", "1e999"]],
  ["2001-12-14", ["time", "2001-12-14T00:00:00Z"]],
  ["2001-1-2", ["time", "2001-01-02T00:00:00Z"]],
  ["2001-12-14t21:59:43.10-05:00", ["time", "2001-12-14T21:59:43.1-05:00"]],
  ["2001-12-14T21:59:43.1234567891Z", ["time", "2001-12-14T21:59:43.123456789Z"]],
  ["2001-12-14 21:59:43.10", ["time", "2001-12-14T21:59:43.1Z"]],
  ["2001-12-14  21:59:43", ["time", "2001-12-14T21:59:43Z"]],
  ["2001-12-14T21:59:43", ["str", "2001-12-14T21:59:43"]],
  ["2001-12-14 21:59:43Z", ["str", "2001-12-14 21:59:43Z"]],
  ["2001-02-29", ["str", "2001-02-29"]],
  ["2000-02-29", ["time", "2000-02-29T00:00:00Z"]],
  ["2001-12-14T21:59:43+00:00", ["time", "2001-12-14T21:59:43Z"]],
  ["2001-12-14T21:59:43,5Z", ["time", "2001-12-14T21:59:43.5Z"]],
  ["2001-12-14T24:00:00Z", ["str", "2001-12-14T24:00:00Z"]],
  ["1:20", ["str", "1:20"]],
  ["3.13.2", ["str", "3.13.2"]],
  ["0x", ["str", "0x"]],
  ["+", ["str", "+"]],
  ["abc", ["str", "abc"]],
];

function expected(want: Want): Scalar {
  if (want[0] === "null") return { kind: "scalar", type: "null" };
  return { kind: "scalar", type: want[0], value: want[1] } as Scalar;
}

test("plain scalars resolve as in go-yaml v3", () => {
  for (const [text, want] of TABLE) {
    assert.deepStrictEqual(resolvePlain(text), expected(want), text);
  }
});

test("the codec types plain scalars, and quoted and block scalars are strings", () => {
  const doc = `${TABLE.map(([text], i) => `k${i}: ${text}`).join("\n")}\nq1: "017"\nq2: 'true'\nq3: |\n    1.5\nt1: !!str 017\nt2: !!float 3\nt3: !!int "12"\n`;
  const [branch] = yamlCodec.parsePlain(new TextEncoder().encode(doc));
  const values = new Map(
    branch?.items.flatMap((i) => (i.kind === "entry" ? [[i.key, i.value] as const] : [])),
  );
  for (const [i, [text, want]] of TABLE.entries())
    assert.deepStrictEqual(values.get(`k${i}`), expected(want), text);
  assert.deepStrictEqual(values.get("q1"), { kind: "scalar", type: "str", value: "017" });
  assert.deepStrictEqual(values.get("q2"), { kind: "scalar", type: "str", value: "true" });
  assert.deepStrictEqual(values.get("q3"), { kind: "scalar", type: "str", value: "1.5\n" });
  assert.deepStrictEqual(values.get("t1"), { kind: "scalar", type: "str", value: "017" });
  assert.deepStrictEqual(values.get("t2"), { kind: "scalar", type: "float", value: 3 });
  assert.deepStrictEqual(values.get("t3"), { kind: "scalar", type: "int", value: 12n });
});

test("integers beyond int64 but within uint64 are refused with the line number", () => {
  const doc = new TextEncoder().encode("a: 1\nbig: 18446744073709551615\n");
  assert.throws(() => yamlCodec.parsePlain(doc), { code: "BAD_INPUT", message: /line 2/ });
});

test("floats print as Go strconv.FormatFloat(v, 'g', -1, 64)", () => {
  const cases: [number, string][] = [
    [1234567, "1.234567e+06"],
    [123456, "123456"],
    [1e21, "1e+21"],
    [1e-5, "1e-05"],
    [0.0001, "0.0001"],
    [1234568000, "1.234568e+09"],
    [1.5, "1.5"],
    [100, "100"],
    [-0, "-0"],
    [5e-324, "5e-324"],
    [1.7976931348623157e308, "1.7976931348623157e+308"],
    [0.1 + 0.2, "0.30000000000000004"],
    [Number.NaN, ".nan"],
    [Number.NEGATIVE_INFINITY, "-.inf"],
  ];
  for (const [value, text] of cases) assert.equal(formatGoFloat(value), text, String(value));
});

test("strings that would read back as something else must be quoted", () => {
  for (const s of [
    "true",
    "yes",
    "No",
    "on",
    "null",
    "~",
    "",
    "12",
    "0x1F",
    "1.5",
    ".inf",
    "2001-12-14",
    "1:20",
    "<<",
  ]) {
    assert.equal(canUsePlain(s), false, s);
  }
  for (const s of ["hello", "3.13.2", "tRue", "ENC[AES256_GCM,data:x,iv:y,tag:z,type:str]", "a b"]) {
    assert.equal(canUsePlain(s), true, s);
  }
});
