import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { KEY_KINDS } from "../../../providers/keys/index.ts";
import type { Comment, Entry, Mapping, Scalar, Value } from "../../../src/envelope/sops/document.ts";
import type { KeyEntry } from "../../../src/envelope/sops/master-key.ts";
import {
  formatLastModified,
  type Metadata,
  metadataFromTree,
  metadataToTree,
} from "../../../src/envelope/sops/metadata.ts";

const s = (value: string): Scalar => ({ kind: "scalar", type: "str", value });
const nul: Scalar = { kind: "scalar", type: "null" };
const map = (...items: ([string, Value] | Comment | Entry)[]): Mapping => ({
  kind: "map",
  items: items.map((i) => (Array.isArray(i) ? { kind: "entry", key: i[0], value: i[1] } : i)),
});
const seq = (...items: Value[]): Value => ({ kind: "seq", items });

/** A tree as nested [key, value] pairs / arrays / scalars, to compare order and types. */
type Plain = string | boolean | bigint | null | Plain[] | [string, Plain][];
function plain(v: Value): Plain {
  if (v.kind === "map")
    return v.items.flatMap((i) => (i.kind === "entry" ? [[i.key, plain(i.value)] as [string, Plain]] : []));
  if (v.kind === "seq") return v.items.flatMap((i) => (i.kind === "comment" ? [] : [plain(i)]));
  if (v.type === "null") return null;
  if (v.type === "str") return String(v.value);
  if (v.type === "int" || v.type === "bool") return v.value;
  throw new Error(`unexpected ${v.type}`);
}

const PGP_ENC = "-----BEGIN PGP MESSAGE-----\n\nwcBMAyUpShfNkFB/AQf/b1Bd\n=5PzX\n-----END PGP MESSAGE-----";
const AGE_ENC =
  "-----BEGIN AGE ENCRYPTED FILE-----\nYWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSBZeHVSdjJoY3ZSQjJz\n-----END AGE ENCRYPTED FILE-----\n";
const MAC =
  "ENC[AES256_GCM,data:t5sI,iv:mhrVlCOWU0MnIYxnccGGFDCPAXsNwl9sopIm7f74kT8=,tag:w+XIuL4lhKHlgGOlclR2PA==,type:str]";
const FP = "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4";
const RECIPIENT = "age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29";

// sops-repo/yaml/format.enc.yaml (3.13 layout)
const FORMAT_313 = map(
  ["lastmodified", s("2026-05-22T20:16:23Z")],
  ["mac", s(MAC)],
  ["pgp", seq(map(["created_at", s("2026-05-22T20:16:20Z")], ["enc", s(PGP_ENC)], ["fp", s(FP)]))],
  ["unencrypted_suffix", s("_unencrypted")],
  ["version", s("3.13.1")],
);

// fluxcd-age/age.yaml (3.9 layout: struct order, empty lists written)
const FLUX_39 = map(
  ["kms", seq()],
  ["gcp_kms", seq()],
  ["azure_kv", seq()],
  ["hc_vault", seq()],
  ["age", seq(map(["recipient", s(RECIPIENT)], ["enc", s(AGE_ENC)]))],
  ["lastmodified", s("2024-11-12T13:33:42Z")],
  ["mac", s(MAC)],
  ["pgp", seq()],
  ["encrypted_regex", s("^(data|stringData)$")],
  ["version", s("3.9.0")],
);

describe("metadataFromTree", () => {
  test("3.13 layout (format.enc.yaml)", () => {
    const md = metadataFromTree(FORMAT_313, KEY_KINDS);
    assert.equal(md.keyGroups.length, 1);
    const [entry] = md.keyGroups[0]!;
    assert.equal(entry!.kind, "pgp");
    assert.equal(entry!.enc, PGP_ENC);
    assert.deepEqual(
      [...entry!.fields],
      [
        ["created_at", "2026-05-22T20:16:20Z"],
        ["enc", PGP_ENC],
        ["fp", FP],
      ],
    );
    assert.equal(md.lastModified, "2026-05-22T20:16:23Z");
    assert.equal(md.mac, MAC);
    assert.deepEqual(md.rule, { kind: "unencrypted_suffix", value: "_unencrypted" });
    assert.equal(md.macOnlyEncrypted, false);
    assert.equal(md.version, "3.13.1");
    assert.equal(md.shamirThreshold, undefined);
  });

  test("3.9 layout with empty lists (fluxcd age.yaml); entry fields in file order", () => {
    const md = metadataFromTree(FLUX_39, KEY_KINDS);
    assert.deepEqual(md.keyGroups, [
      [
        {
          kind: "age",
          enc: AGE_ENC,
          fields: new Map([
            ["recipient", RECIPIENT],
            ["enc", AGE_ENC],
          ]),
        },
      ],
    ]);
    assert.deepEqual(md.rule, { kind: "encrypted_regex", value: "^(data|stringData)$" });
  });

  test("no rule recorded (binary store since 3.11) reads as the default, as sops's ToInternal", () => {
    const tree = map(...FORMAT_313.items.filter((i) => i.kind === "entry" && i.key !== "unencrypted_suffix"));
    assert.deepEqual(metadataFromTree(tree, KEY_KINDS).rule, {
      kind: "unencrypted_suffix",
      value: "_unencrypted",
    });
  });

  test("lenient like mapstructure: case, numbers as strings, unknown fields, nulls, lone mapping", () => {
    const md = metadataFromTree(
      map(
        ["LastModified", s("2024-01-01T00:00:00.5+02:00")],
        ["MAC", s(MAC)],
        ["kms", nul],
        ["Age", map(["Recipient", s(RECIPIENT)], ["ENC", s(AGE_ENC)], ["comment", s("ignored")])],
        [
          "pgp",
          seq(
            map(
              ["Created_At", s("2019-12-10T22:45:53Z")],
              ["enc", s(PGP_ENC)],
              ["fp", { kind: "scalar", type: "int", value: 42n }],
            ),
          ),
        ],
        ["Shamir_Threshold", s("2.0")],
        ["mac_only_encrypted", s("true")],
        ["whatever", map(["nested", s("x")])],
        ["version", s("v3.13.2")],
      ),
      KEY_KINDS,
    );
    assert.equal(md.lastModified, "2024-01-01T00:00:00.5+02:00");
    assert.equal(md.mac, MAC);
    assert.equal(md.shamirThreshold, 2);
    assert.equal(md.macOnlyEncrypted, true);
    assert.deepEqual(md.rule, { kind: "unencrypted_suffix", value: "_unencrypted" });
    assert.deepEqual(
      md.keyGroups[0]!.map((e) => [e.kind, [...e.fields]]),
      [
        [
          "pgp",
          [
            ["created_at", "2019-12-10T22:45:53Z"],
            ["enc", PGP_ENC],
            ["fp", "42"],
          ],
        ],
        [
          "age",
          [
            ["recipient", RECIPIENT],
            ["enc", AGE_ENC],
          ],
        ],
      ],
    );
    assert.equal(
      metadataFromTree(map(...FORMAT_313.items.slice(0, 4), ["version", s("1.14")]), KEY_KINDS).version,
      "1.14",
    );
    const intThreshold = metadataFromTree(
      map(...FORMAT_313.items, ["shamir_threshold", { kind: "scalar", type: "int", value: 3n }]),
      KEY_KINDS,
    );
    assert.equal(intThreshold.shamirThreshold, 3);
  });

  test("an exact field name beats a case-folded one", () => {
    const md = metadataFromTree(
      map(
        ["lastmodified", s("2024-01-01T00:00:00Z")],
        ["LASTMODIFIED", s("junk")],
        ...FORMAT_313.items.slice(1),
      ),
      KEY_KINDS,
    );
    assert.equal(md.lastModified, "2024-01-01T00:00:00Z");
  });

  test("top-level key lists win over key_groups", () => {
    const groups = [
      "key_groups",
      seq(map(["age", seq(map(["recipient", s("age1other")], ["enc", s("x")]))])),
    ] as [string, Value];
    const md = metadataFromTree(map(...FORMAT_313.items, groups), KEY_KINDS);
    assert.equal(md.keyGroups.length, 1);
    assert.equal(md.keyGroups[0]![0]!.kind, "pgp");
  });

  test("key groups, with sops's empty hc_vault lists", () => {
    const group = (r: string): Value =>
      map(["age", seq(map(["enc", s(AGE_ENC)], ["recipient", s(r)]))], ["hc_vault", seq()]);
    const md = metadataFromTree(
      map(
        ["key_groups", seq(group("age1a"), group("age1b"))],
        ["lastmodified", s("2026-11-30T06:34:04Z")],
        ["mac", s(MAC)],
        ["shamir_threshold", { kind: "scalar", type: "int", value: 2n }],
        ["unencrypted_suffix", s("_unencrypted")],
        ["version", s("3.13.2")],
      ),
      KEY_KINDS,
    );
    assert.deepEqual(
      md.keyGroups.map((g) => g.map((e) => e.fields.get("recipient"))),
      [["age1a"], ["age1b"]],
    );
    assert.equal(md.shamirThreshold, 2);
  });

  test("rejections", () => {
    const without = (key: string): Mapping =>
      map(...FORMAT_313.items.filter((i) => i.kind !== "entry" || i.key !== key));
    const cases: [string, Mapping, string][] = [
      ["no keys", without("pgp"), "No keys found in file"],
      ["two rules", map(...FORMAT_313.items, ["encrypted_regex", s("x")]), "BAD_INPUT"],
      ["no lastmodified", without("lastmodified"), "BAD_INPUT"],
      [
        "bad lastmodified",
        map(...without("lastmodified").items, ["lastmodified", s("2024-01-01 00:00")]),
        "BAD_INPUT",
      ],
      ["bad version", map(...without("version").items, ["version", s("barbaz")]), "BAD_INPUT"],
      ["missing version", without("version"), "BAD_INPUT"],
      [
        "pgp without created_at",
        map(["pgp", seq(map(["enc", s("x")], ["fp", s(FP)]))], ...without("pgp").items),
        "BAD_INPUT",
      ],
      ["list of scalars", map(["pgp", seq(s("x"))], ...without("pgp").items), "BAD_INPUT"],
      ["mapping as a string field", map(["mac", map()], ...without("mac").items), "BAD_INPUT"],
      ["bad bool", map(...FORMAT_313.items, ["mac_only_encrypted", s("maybe")]), "BAD_INPUT"],
    ];
    for (const [name, tree, want] of cases) {
      assert.throws(
        () => metadataFromTree(tree, KEY_KINDS),
        (err: { code: string; message: string }) => {
          assert.ok(err.code === want || err.message === want, `${name}: ${err.code} ${err.message}`);
          return true;
        },
      );
    }
    const hckms = map(
      ["hckms", seq(map(["key_id", s("r:u")], ["created_at", s("2024-01-01T00:00:00Z")], ["enc", s("x")]))],
      ...FORMAT_313.items,
    );
    assert.throws(() => metadataFromTree(hckms, []), { code: "UNSUPPORTED" }, "a table without hckms");
    const read = metadataFromTree(hckms, KEY_KINDS);
    assert.deepEqual(
      read.keyGroups
        .flat()
        .filter((e) => e.kind === "hckms")
        .map((e) => e.enc),
      ["x"],
    );
  });
});

describe("metadataToTree", () => {
  test("3.13 layout is reproduced exactly", () => {
    assert.deepEqual(
      plain(metadataToTree(metadataFromTree(FORMAT_313, KEY_KINDS), KEY_KINDS)),
      plain(FORMAT_313),
    );
  });

  test("3.9 layout is rewritten as 3.13 does: alphabetical everywhere, empty lists omitted", () => {
    assert.deepEqual(plain(metadataToTree(metadataFromTree(FLUX_39, KEY_KINDS), KEY_KINDS)), [
      [
        "age",
        [
          [
            ["enc", AGE_ENC],
            ["recipient", RECIPIENT],
          ],
        ],
      ],
      ["encrypted_regex", "^(data|stringData)$"],
      ["lastmodified", "2024-11-12T13:33:42Z"],
      ["mac", MAC],
      ["version", "3.9.0"],
    ]);
  });

  test("several groups: key_groups with age and hc_vault always present, threshold as int", () => {
    const age = (r: string): KeyEntry => ({
      kind: "age",
      enc: AGE_ENC,
      fields: new Map([
        ["recipient", r],
        ["enc", AGE_ENC],
      ]),
    });
    const pgp: KeyEntry = {
      kind: "pgp",
      enc: "P",
      fields: new Map([
        ["fp", FP],
        ["created_at", "2024-01-01T00:00:00.9Z"],
      ]),
    };
    const md: Metadata = {
      keyGroups: [[age("age1a")], [pgp, age("age1b")]],
      shamirThreshold: 2,
      lastModified: "2026-11-30T06:34:04Z",
      mac: MAC,
      rule: { kind: "unencrypted_suffix", value: "_unencrypted" },
      macOnlyEncrypted: true,
      version: "3.13.2",
    };
    const tree = metadataToTree(md, KEY_KINDS);
    assert.deepEqual(plain(tree), [
      [
        "key_groups",
        [
          [
            [
              "age",
              [
                [
                  ["enc", AGE_ENC],
                  ["recipient", "age1a"],
                ],
              ],
            ],
            ["hc_vault", []],
          ],
          [
            [
              "age",
              [
                [
                  ["enc", AGE_ENC],
                  ["recipient", "age1b"],
                ],
              ],
            ],
            ["hc_vault", []],
            [
              "pgp",
              [
                [
                  ["created_at", "2024-01-01T00:00:00Z"],
                  ["enc", "P"],
                  ["fp", FP],
                ],
              ],
            ],
          ],
        ],
      ],
      ["lastmodified", "2026-11-30T06:34:04Z"],
      ["mac", MAC],
      ["mac_only_encrypted", true],
      ["shamir_threshold", 2n],
      ["unencrypted_suffix", "_unencrypted"],
      ["version", "3.13.2"],
    ]);
    const back = metadataFromTree(tree, KEY_KINDS);
    assert.equal(back.shamirThreshold, 2);
    assert.equal(back.macOnlyEncrypted, true);
    assert.deepEqual(
      back.keyGroups.map((g) => g.map((e) => e.kind)),
      [["age"], ["pgp", "age"]],
    );
  });

  test("kms entry: aws_profile always, role and context only when set, context sorted", () => {
    const kms: KeyEntry = {
      kind: "kms",
      enc: "CiA=",
      fields: new Map<string, string | Record<string, string>>([
        ["arn", "arn:aws:kms:us-east-1:1:key/x"],
        ["context", { "bootseal-machine": "ns/m", a: "1" }],
        ["created_at", "2024-01-01T00:00:00Z"],
        ["role", ""],
      ]),
    };
    const tree = metadataToTree(
      {
        keyGroups: [[kms]],
        lastModified: "2024-01-01T00:00:00Z",
        mac: "",
        rule: null,
        macOnlyEncrypted: false,
        version: "3.13.2",
      },
      KEY_KINDS,
    );
    assert.deepEqual(plain(tree), [
      [
        "kms",
        [
          [
            ["arn", "arn:aws:kms:us-east-1:1:key/x"],
            ["aws_profile", ""],
            [
              "context",
              [
                ["a", "1"],
                ["bootseal-machine", "ns/m"],
              ],
            ],
            ["created_at", "2024-01-01T00:00:00Z"],
            ["enc", "CiA="],
          ],
        ],
      ],
      ["lastmodified", "2024-01-01T00:00:00Z"],
      ["mac", ""],
      ["version", "3.13.2"],
    ]);
    const back = metadataFromTree(tree, KEY_KINDS).keyGroups[0]![0]!;
    assert.deepEqual(back.fields.get("context"), { a: "1", "bootseal-machine": "ns/m" });
  });

  test("lastmodified is written at second precision", () => {
    const md = { ...metadataFromTree(FORMAT_313, KEY_KINDS), lastModified: "2026-05-22T20:16:23.75+00:00" };
    const lm = metadataToTree(md, KEY_KINDS).items.find(
      (i) => i.kind === "entry" && i.key === "lastmodified",
    );
    assert.deepEqual(lm && lm.kind === "entry" ? plain(lm.value) : null, "2026-05-22T20:16:23Z");
  });

  test("property: written metadata reads back to the same metadata", () => {
    const entry = fc.oneof(
      fc.record({ r: fc.string({ minLength: 1 }), enc: fc.string() }).map(
        ({ r, enc }): KeyEntry => ({
          kind: "age",
          enc,
          fields: new Map([
            ["enc", enc],
            ["recipient", r],
          ]),
        }),
      ),
      fc
        .record({
          fp: fc.string({ unit: fc.constantFrom(..."0123456789ABCDEF"), minLength: 40, maxLength: 40 }),
          enc: fc.string(),
          t: fc.integer({ min: 0, max: 4e9 }),
        })
        .map(
          ({ fp, enc, t }): KeyEntry => ({
            kind: "pgp",
            enc,
            fields: new Map([
              ["created_at", formatLastModified(new Date(t * 1000))],
              ["enc", enc],
              ["fp", fp],
            ]),
          }),
        ),
    );
    fc.assert(
      fc.property(
        fc.array(fc.array(entry, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 0, max: 4e9 }),
        fc.boolean(),
        (groups, t, macOnly) => {
          const md: Metadata = {
            keyGroups: groups,
            ...(groups.length > 1 ? { shamirThreshold: groups.length } : {}),
            lastModified: formatLastModified(new Date(t * 1000)),
            mac: MAC,
            rule: { kind: "encrypted_regex", value: "^data$" },
            macOnlyEncrypted: macOnly,
            version: "3.13.2",
          };
          const back = metadataFromTree(metadataToTree(md, KEY_KINDS), KEY_KINDS);
          // Reading groups entries by kind (sops order) and fields alphabetically.
          const norm = (m: Metadata) => ({
            ...m,
            keyGroups: m.keyGroups.map((g) =>
              [...g]
                .sort((a, b) => (a.kind < b.kind ? 1 : a.kind > b.kind ? -1 : 0))
                .map((e) => ({ ...e, fields: [...e.fields].sort() })),
            ),
          });
          assert.deepEqual(norm(back), norm(md));
        },
      ),
      { numRuns: 100 },
    );
  });
});

test("formatLastModified: Go RFC 3339 in UTC at second precision", () => {
  assert.equal(formatLastModified(new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 678))), "2024-01-02T03:04:05Z");
});
