import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Branch, Comment, Mapping, Scalar, Value } from "../../../src/envelope/sops/document.ts";
import type { SelectionRule } from "../../../src/envelope/sops/metadata.ts";
import { aadForPath, compileRule, transformBranches } from "../../../src/envelope/sops/walk.ts";

const s = (value: string): Scalar => ({ kind: "scalar", type: "str", value });
const c = (text: string): Comment => ({ kind: "comment", text });
const map = (...items: ([string, Value] | Comment)[]): Mapping => ({
  kind: "map",
  items: items.map((i) => (Array.isArray(i) ? { kind: "entry", key: i[0], value: i[1] } : i)),
});
const seq = (...items: (Value | Comment)[]): Value => ({ kind: "seq", items });

interface Seen {
  what: string;
  aad: string;
  encrypted: boolean;
}

/** Record every visit in order; leaves are named by their string value. */
function visits(branches: Branch[], rule: SelectionRule | null): Seen[] {
  const seen: Seen[] = [];
  transformBranches(branches, compileRule(rule), {
    scalar(v, visit) {
      seen.push({
        what: v.type === "str" ? String(v.value) : v.type,
        aad: visit.aad,
        encrypted: visit.encrypted,
      });
      return v;
    },
    comment(v, visit) {
      seen.push({ what: `#${v.text}`, aad: visit.aad, encrypted: visit.encrypted });
      return v;
    },
  });
  return seen;
}

const encryptedOnes = (seen: Seen[]): string[] => seen.filter((x) => x.encrypted).map((x) => x.what);

describe("walk order and AAD paths", () => {
  const doc = map(
    c("top"),
    ["a", s("1")],
    ["app2", map(["db", map(["user", s("2")], c("in db"))], ["key", s("3")])],
    ["list", seq(s("4"), c("in list"), map(["number", s("5")]), seq(s("6")))],
    ["nothing", { kind: "scalar", type: "null" }],
    ["empty", map()],
  );

  test("depth first, file order; list positions not in the path; comments use the container's path", () => {
    assert.deepEqual(
      visits([doc], null).map(({ what, aad }) => [what, aad]),
      [
        ["#top", ":"],
        ["1", "a:"],
        ["2", "app2:db:user:"],
        ["#in db", "app2:db:"],
        ["3", "app2:key:"],
        ["4", "list:"],
        ["#in list", "list:"],
        ["5", "list:number:"],
        ["6", "list:"],
      ],
    );
  });

  test("each branch starts from the empty path", () => {
    const seen = visits([map(["x", s("1")]), map(c("second doc"), ["y", s("2")])], null);
    assert.deepEqual(
      seen.map((x) => x.aad),
      ["x:", ":", "y:"],
    );
  });

  test("keys are used verbatim", () => {
    assert.equal(aadForPath(["foo ", "a:b"]), "foo :a:b:");
    assert.equal(aadForPath([]), ":");
  });

  test("transform rebuilds the tree with the returned nodes and keeps shape", () => {
    const out = transformBranches([doc], compileRule(null), {
      scalar: (v) => (v.type === "str" ? s(`<${v.value}>`) : v),
      comment: (v) => ({ ...v, text: v.text.toUpperCase() }),
    });
    const back = transformBranches(out, compileRule(null), {
      scalar: (v) => (v.type === "str" ? s(String(v.value).slice(1, -1)) : v),
      comment: (v) => v,
    });
    assert.equal((out[0]!.items[0] as Comment).text, "TOP");
    assert.equal(((back[0]!.items[1] as { value: Scalar }).value as { value: string }).value, "1");
    assert.deepEqual(back[0]!.items[5], doc.items[5]);
  });
});

describe("selection rules (sops shouldBeEncrypted)", () => {
  const doc = map(
    c("top"),
    ["plain_unencrypted", s("a")],
    ["nested_unencrypted", map(["deep", s("b")])],
    ["normal", s("c")],
    ["stringData", map(["key", s("d")], c("inside"))],
    ["data_enc", s("e")],
  );

  test("default (null and empty value): unencrypted_suffix _unencrypted, on any path component", () => {
    for (const rule of [null, { kind: "unencrypted_suffix", value: "" } as const]) {
      assert.deepEqual(encryptedOnes(visits([doc], rule)), ["#top", "c", "d", "#inside", "e"]);
    }
  });

  test("encrypted_suffix", () => {
    assert.deepEqual(encryptedOnes(visits([doc], { kind: "encrypted_suffix", value: "_enc" })), ["e"]);
  });

  test("encrypted_regex: only below matching keys; top-level comments stay plain", () => {
    const rule = { kind: "encrypted_regex", value: "^(data|stringData)$" } as const;
    assert.deepEqual(encryptedOnes(visits([doc], rule)), ["d", "#inside"]);
  });

  test("unencrypted_regex", () => {
    const rule = { kind: "unencrypted_regex", value: "(?i)^NORMAL$|plain" } as const;
    assert.deepEqual(encryptedOnes(visits([doc], rule)), ["#top", "b", "d", "#inside", "e"]);
  });

  const commented = map(
    ["a", s("1")],
    c("mark"),
    c("after"),
    ["b", s("2")],
    c("other"),
    ["c", s("3")],
    ["n", map(["x", s("4")], c("mark"), ["y", s("5")], ["z", s("6")])],
    c("mark"),
    ["m", map(["p", s("7")], c("free"), ["q", seq(s("8"), c("mark"), s("9"), s("10"))])],
  );

  test("encrypted_comment_regex: marker stays readable, covers the next item, nested levels inherit", () => {
    const seen = visits([commented], { kind: "encrypted_comment_regex", value: "^mark$" });
    // The inner "mark" in q's list is encrypted: the outer marker above m is still active.
    assert.deepEqual(encryptedOnes(seen), ["#after", "2", "5", "7", "#free", "8", "#mark", "9", "10"]);
  });

  test("unencrypted_comment_regex: marker and what it covers stay plaintext", () => {
    const seen = visits([commented], { kind: "unencrypted_comment_regex", value: "^mark$" });
    const plain = seen.filter((x) => !x.encrypted).map((x) => x.what);
    assert.deepEqual(plain, [
      "#mark",
      "#after",
      "2",
      "#mark",
      "5",
      "#mark",
      "7",
      "#free",
      "8",
      "#mark",
      "9",
      "10",
    ]);
  });

  test("invalid regexes are refused, never treated as 'no match'", () => {
    for (const kind of [
      "encrypted_regex",
      "unencrypted_regex",
      "encrypted_comment_regex",
      "unencrypted_comment_regex",
    ] as const) {
      assert.throws(() => compileRule({ kind, value: "(" }), { code: "BAD_INPUT" });
    }
    assert.throws(() => compileRule({ kind: "nope", value: "x" } as unknown as SelectionRule), {
      code: "BAD_INPUT",
    });
  });
});
