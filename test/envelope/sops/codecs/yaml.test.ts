/**
 * The YAML codec against sops-written documents (shared vectors) and its error contract.
 * Cross-checks against the live sops binary are in yaml-sops.test.ts.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { yamlCodec } from "../../../../src/envelope/sops/codecs/yaml.ts";
import type { Branch, Mapping, Value } from "../../../../src/envelope/sops/document.ts";
import { VECTORS_URL as VECTORS } from "../../../helpers/vectors.ts";

const vector = (path: string): Uint8Array => readFileSync(new URL(path, VECTORS));
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (b: Uint8Array): string => new TextDecoder().decode(b);

function get(m: Mapping, ...path: string[]): Value {
  let v: Value = m;
  for (const key of path) {
    assert.equal(v.kind, "map", `${key}: not a mapping`);
    const found: Mapping["items"][number] | undefined = (v as Mapping).items.find(
      (i) => i.kind === "entry" && i.key === key,
    );
    assert.ok(found && found.kind === "entry", `missing key ${key}`);
    v = found.value;
  }
  return v;
}
const commentTexts = (v: Value): string[] =>
  v.kind === "scalar" ? [] : v.items.flatMap((i) => (i.kind === "comment" ? [i.text] : []));

test("format.enc.yaml (sops 3.13) round-trips byte for byte", () => {
  const input = vector("sops-repo/yaml/format.enc.yaml");
  const { branches, metadata } = yamlCodec.parseEncrypted(input);
  assert.equal(branches.length, 1);
  assert.deepStrictEqual(
    metadata.items.map((i) => (i.kind === "entry" ? i.key : "#")),
    ["lastmodified", "mac", "pgp", "unencrypted_suffix", "version"],
  );
  assert.deepStrictEqual(get(metadata, "lastmodified"), {
    kind: "scalar",
    type: "str",
    value: "2026-05-22T20:16:23Z",
  });
  assert.deepStrictEqual(get(metadata, "version"), { kind: "scalar", type: "str", value: "3.13.1" });
  assert.equal(text(yamlCodec.emitEncrypted(branches, metadata)), text(input));
});

test("a metadata tree as metadata.ts builds it is written as sops writes it", () => {
  const s = (value: string): Value => ({ kind: "scalar", type: "str", value });
  const e = (key: string, value: Value) => ({ kind: "entry", key, value }) as const;
  const metadata: Mapping = {
    kind: "map",
    items: [
      e("age", {
        kind: "seq",
        items: [
          {
            kind: "map",
            items: [
              e("enc", s("-----BEGIN AGE ENCRYPTED FILE-----\nYWJj\n-----END AGE ENCRYPTED FILE-----\n")),
              e("recipient", s("age1xyz")),
            ],
          },
        ],
      }),
      e("lastmodified", s("2026-05-22T20:16:23Z")),
      e("mac", s("ENC[AES256_GCM,data:AA==,iv:BB==,tag:CC==,type:str]")),
      e("mac_only_encrypted", { kind: "scalar", type: "bool", value: true }),
      e("pgp", {
        kind: "seq",
        items: [
          {
            kind: "map",
            items: [
              e("created_at", s("2026-05-22T20:16:20Z")),
              e("enc", s("-----BEGIN PGP MESSAGE-----\n\nwcBM\n-----END PGP MESSAGE-----")),
              e("fp", s("FBC7")),
            ],
          },
        ],
      }),
      e("shamir_threshold", { kind: "scalar", type: "int", value: 2n }),
      e("unencrypted_suffix", s("_unencrypted")),
      e("version", s("3.13.2")),
    ],
  };
  const branch: Branch = {
    kind: "map",
    items: [e("foo", s("ENC[AES256_GCM,data:8CvE,iv:x=,tag:y==,type:str]"))],
  };
  const out = text(yamlCodec.emitEncrypted([branch, branch], metadata));
  const doc = [
    "foo: ENC[AES256_GCM,data:8CvE,iv:x=,tag:y==,type:str]",
    "sops:",
    "    age:",
    "        - enc: |",
    "            -----BEGIN AGE ENCRYPTED FILE-----",
    "            YWJj",
    "            -----END AGE ENCRYPTED FILE-----",
    "          recipient: age1xyz",
    '    lastmodified: "2026-05-22T20:16:23Z"',
    "    mac: ENC[AES256_GCM,data:AA==,iv:BB==,tag:CC==,type:str]",
    "    mac_only_encrypted: true",
    "    pgp:",
    '        - created_at: "2026-05-22T20:16:20Z"',
    "          enc: |-",
    "            -----BEGIN PGP MESSAGE-----",
    "",
    "            wcBM",
    "            -----END PGP MESSAGE-----",
    "          fp: FBC7",
    "    shamir_threshold: 2",
    "    unencrypted_suffix: _unencrypted",
    "    version: 3.13.2",
  ].join("\n");
  assert.equal(out, `${doc}\n---\n${doc}\n`);
  const back = yamlCodec.parseEncrypted(bytes(out));
  assert.deepStrictEqual(back.metadata, metadata);
  assert.deepStrictEqual(back.branches, [branch, branch]);
});

test("older layouts parse: comments land in the mapping that holds them", () => {
  const example = yamlCodec.parseEncrypted(vector("sops-repo/yaml/example.yaml"));
  const [doc] = example.branches;
  assert.ok(doc);
  assert.equal(commentTexts(get(doc, "app2", "db")).length, 1);
  assert.equal(commentTexts(get(doc, "app2")).length, 0);
  assert.equal(commentTexts(get(doc, "this", "is", "a", "nested")).length, 3);
  assert.equal(commentTexts(doc).length, 0);
  assert.ok(commentTexts(get(doc, "app2", "db"))[0]?.startsWith("ENC[AES256_GCM,"));
  assert.equal(get(example.metadata, "version").kind, "scalar");

  const comments = yamlCodec.parseEncrypted(vector("sops-repo/yaml/comments.enc.yaml"));
  assert.deepStrictEqual(
    comments.branches[0]?.items.map((i) => i.kind),
    ["comment", "entry", "comment", "entry"],
  );
  // pre-3.7 metadata: single-quoted timestamps, empty lists
  assert.deepStrictEqual(get(comments.metadata, "lastmodified"), {
    kind: "scalar",
    type: "str",
    value: "2020-10-07T15:49:13Z",
  });
  assert.deepStrictEqual(get(comments.metadata, "kms"), { kind: "seq", items: [] });

  const flux = yamlCodec.parseEncrypted(vector("fluxcd-age/age.yaml"));
  assert.deepStrictEqual(get(flux.branches[0]!, "metadata", "name"), {
    kind: "scalar",
    type: "str",
    value: "age",
  });
  assert.equal(get(flux.metadata, "encrypted_regex").kind, "scalar");
  const age = get(flux.metadata, "age");
  assert.equal(age.kind === "seq" ? age.items.length : 0, 1);

  const unencrypted = yamlCodec.parseEncrypted(vector("sops-repo/yaml/comments_unencrypted_comments.yaml"));
  assert.ok(commentTexts(unencrypted.branches[0]!).some((c) => !c.startsWith("ENC[")));
});

test("plaintext vectors: comment items, inline flags and list comments", () => {
  const [list] = yamlCodec.parsePlain(vector("sops-repo/plaintext/comments_list.yaml"));
  assert.deepStrictEqual(get(list!, "lorem"), {
    kind: "seq",
    items: [
      { kind: "scalar", type: "str", value: "foo" },
      { kind: "comment", text: "this-is-a-comment" },
      { kind: "scalar", type: "str", value: "bar" },
    ],
  });
  const [doc] = yamlCodec.parsePlain(bytes("# top\na: 1 # inline\nb:\n    # in b\n    c: x\n"));
  assert.deepStrictEqual(doc, {
    kind: "map",
    items: [
      { kind: "comment", text: " top" },
      { kind: "comment", text: " inline", inline: true },
      { kind: "entry", key: "a", value: { kind: "scalar", type: "int", value: 1n } },
      {
        kind: "entry",
        key: "b",
        value: {
          kind: "map",
          items: [
            { kind: "comment", text: " in b" },
            { kind: "entry", key: "c", value: { kind: "scalar", type: "str", value: "x" } },
          ],
        },
      },
    ],
  });
});

test("multi-document: metadata from the first document, removed from all", () => {
  const input = bytes("a: 1\nsops:\n    version: 3.13.2\n---\nb: 2\nsops:\n    version: other\n");
  const { branches, metadata } = yamlCodec.parseEncrypted(input);
  assert.equal(branches.length, 2);
  assert.ok(branches.every((b) => b.items.every((i) => i.kind !== "entry" || i.key !== "sops")));
  assert.deepStrictEqual(get(metadata, "version"), { kind: "scalar", type: "str", value: "3.13.2" });
});

test("anchors and aliases are expanded into copies", () => {
  const [doc] = yamlCodec.parsePlain(bytes("base: &b\n    x: 1\ncopy: *b\nlist: [*b]\n"));
  assert.deepStrictEqual(get(doc!, "copy"), get(doc!, "base"));
  assert.deepStrictEqual(get(doc!, "list"), { kind: "seq", items: [get(doc!, "base")] });
  assert.equal(text(yamlCodec.emitPlain([doc!])), "base:\n    x: 1\ncopy:\n    x: 1\nlist:\n    - x: 1\n");
});

test("empty input, empty documents, empty collections and indentation", () => {
  assert.deepStrictEqual(yamlCodec.parsePlain(bytes("")), []);
  assert.deepStrictEqual(yamlCodec.parsePlain(bytes("---\n")), [{ kind: "map", items: [] }]);
  const branches = yamlCodec.parsePlain(bytes("a: {}\nb: []\nc:\nd:\n  - x\n"));
  assert.equal(text(yamlCodec.emitPlain(branches)), "a: {}\nb: []\nc: null\nd:\n    - x\n");
  assert.equal(text(yamlCodec.emitPlain(branches, { indent: 2 })), "a: {}\nb: []\nc: null\nd:\n  - x\n");
  assert.equal(text(yamlCodec.emitPlain([{ kind: "map", items: [] }])), "{}\n");
  assert.throws(() => yamlCodec.emitPlain(branches, { indent: "\t" }), { code: "USAGE" });
});

test("malformed input is BAD_INPUT with a line number, and never echoes values", () => {
  const cases: [string, RegExp][] = [
    ["a: 1\nb: [unclosed\n", /line \d/],
    ["a: 1\nkey: one\nkey: two\n", /line 3/],
    ["- a\n- b\n", /line 1: .*sequences are not supported/],
    ["just a scalar\n", /line 1: .*values are not supported/],
    ["a: 1\n1: x\n", /line 2: Only string keys are supported/],
    ["a:\n    true: x\n", /line 2: Only string keys are supported/],
    ["a: 1\n? [x]\n: y\n", /Only string keys are supported/],
    ["a: *missing\n", /line 1/],
    ["a: !!int nope\n", /line 1/],
    // The yaml package quotes the source in these: only the description is kept.
    ["a: |xs3cr3t\n  y\n", /line 1: Block scalar header includes extra characters \(UNEXPECTED_TOKEN\)$/],
    ["a: 1\n]s3cr3t\n", /line 2: Unexpected flow-seq-end token in YAML stream \(UNEXPECTED_TOKEN\)$/],
  ];
  for (const [input, message] of cases) {
    assert.throws(
      () => yamlCodec.parsePlain(bytes(input)),
      (err: unknown) => {
        const e = err as { code?: string; message?: string };
        assert.equal(e.code, "BAD_INPUT", input);
        assert.match(e.message ?? "", message, input);
        assert.doesNotMatch(e.message ?? "", /s3cr3t/);
        return true;
      },
    );
  }
  assert.throws(
    () => yamlCodec.parsePlain(bytes("password: s3cr3t\npassword: s3cr3t\n")),
    (err: unknown) => {
      assert.doesNotMatch((err as Error).message, /s3cr3t/);
      return true;
    },
  );
  assert.throws(() => yamlCodec.parsePlain(new Uint8Array([0x61, 0x3a, 0x20, 0xff])), { code: "BAD_INPUT" });
});

test("sops metadata: ALREADY_ENCRYPTED on plain parse, NOT_ENCRYPTED when missing", () => {
  assert.throws(() => yamlCodec.parsePlain(vector("sops-repo/yaml/format.enc.yaml")), {
    code: "ALREADY_ENCRYPTED",
  });
  assert.throws(() => yamlCodec.parseEncrypted(bytes("a: 1\n")), { code: "NOT_ENCRYPTED" });
  assert.throws(() => yamlCodec.parseEncrypted(bytes("a: 1\n---\nsops:\n    version: 3.13.2\n")), {
    code: "NOT_ENCRYPTED",
  });
  assert.throws(() => yamlCodec.parseEncrypted(bytes("sops: 1\n")), { code: "BAD_INPUT" });
});
