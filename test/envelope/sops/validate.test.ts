/**
 * Structural validation of already-encrypted documents (src/envelope/sops/validate.ts, issue #10
 * M5) and the json-or-binary decision from what the MAC covers (L4). Pure: the sops vectors and
 * mutations of them, no key is used.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { KEY_KINDS } from "../../../providers/keys/index.ts";
import { loadEncrypted, loadJsonOrBinary, loadValidated } from "../../../src/envelope/document.ts";
import type { Format } from "../../../src/envelope/sops/codecs/codec.ts";
import { formatFromPath } from "../../../src/envelope/sops/codecs/index.ts";
import { checkGroupsNamed, jsonStoreFormat } from "../../../src/envelope/sops/validate.ts";
import { isBootsealError } from "../../../src/errors.ts";
import { VECTORS_DIR } from "../../helpers/vectors.ts";

const read = (rel: string): Buffer => readFileSync(`${VECTORS_DIR}/${rel}`);
const bytes = (v: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(v, null, "\t"));
const BINARY = JSON.parse(read("sops-repo/binary/example.txt").toString()) as Record<string, unknown>;
const JSON_DOC = JSON.parse(read("sops-repo/json/format.enc.json").toString()) as Record<string, unknown>;
const SECRET = "db-password=hunter2";
const clone = <T>(v: T): T => structuredClone(v);

function refused(input: Uint8Array, format: Format, pattern: RegExp): void {
  assert.throws(
    () => loadValidated(input, format, KEY_KINDS),
    (err: unknown) => {
      assert.ok(isBootsealError(err), String(err));
      assert.equal(err.code, "BAD_INPUT");
      assert.match(err.message, pattern);
      assert.ok(!err.message.includes(SECRET) && !err.message.includes("garbage"), err.message);
      return true;
    },
  );
}

function withSops(doc: Record<string, unknown>, change: (sops: Record<string, unknown>) => void) {
  const out = clone(doc);
  change(out.sops as Record<string, unknown>);
  return out;
}

test("every sops-made vector passes, except plaintext comments and a missing MAC", () => {
  const ok = [
    "sops-repo/yaml/example.yaml",
    "sops-repo/yaml/format.enc.yaml",
    "sops-repo/yaml/comments.enc.yaml",
    "sops-repo/json/example.json",
    "sops-repo/json/format.enc.json",
    "sops-repo/json/static_github.json",
    "sops-repo/ini/example.ini",
    "sops-repo/ini/format.enc.ini",
    "sops-repo/dotenv/format.enc.env",
    "sops-repo/binary/example.txt",
    "fluxcd-age/age.yaml",
    "fluxcd-age/env.env",
    "fluxcd-age/file.txt",
  ];
  for (const f of ok) loadValidated(read(f), formatFromPath(f), KEY_KINDS);
  // sops 3.3 left comments in plaintext: a stored document must not carry plaintext there.
  refused(
    read("sops-repo/yaml/comments_unencrypted_comments.yaml"),
    "yaml",
    /a comment at .* must be encrypted/,
  );
  refused(read("sops-repo/yaml/no_mac.yaml"), "yaml", /no MAC/);
});

test("plaintext where the rule says encrypted is refused, naming the key", () => {
  refused(bytes({ ...BINARY, data: SECRET }), "json", /value at "data" must be encrypted/);
  refused(bytes({ ...BINARY, data: 12 }), "json", /value at "data" must be encrypted but is a plain int/);
  refused(bytes({ ...BINARY, data: true }), "json", /plain bool/);
  refused(bytes({ ...JSON_DOC, extra: "plain" }), "json", /value at "extra" must be encrypted/);
  refused(bytes({ ...JSON_DOC, nested: { a: [{ b: SECRET }] } }), "json", /"nested"\."a"\."b"/);
  const yaml = `a: ${SECRET}\n${read("sops-repo/yaml/format.enc.yaml").toString()}`;
  refused(new TextEncoder().encode(yaml), "yaml", /value at "a" must be encrypted/);
  // What the rule leaves in plaintext stays allowed (the vectors above have _unencrypted keys).
  loadValidated(bytes({ ...JSON_DOC, note_unencrypted: "visible" }), "json", KEY_KINDS);
  // The document's own rule decides, but a rule that encrypts nothing seals nothing.
  const open = withSops(BINARY, (s) => {
    delete s.unencrypted_suffix;
    s.unencrypted_regex = ".*";
  });
  refused(bytes({ ...open, data: SECRET }), "json", /leaves every value unencrypted/);
  // Empty and null values are left unencrypted by sops.
  loadValidated(bytes({ ...JSON_DOC, empty: "", none: null }), "json", KEY_KINDS);
});

test("an ENC[] value must be well formed: base64, 32-byte iv, 16-byte tag, a known type", () => {
  const good = JSON_DOC.foo as string;
  const cases: [string, RegExp][] = [
    ["ENC[garbage]", /is not an ENC/],
    [good.replace("AES256_GCM", "AES128_GCM"), /is not an ENC/],
    [good.replace(/data:[^,]+/, "data:!!!!"), /is not an ENC/],
    [good.replace(/data:[^,]+/, "data:abc"), /data that is not/],
    [good.replace(/iv:[^,]+/, "iv:AAAA"), /iv that is not 32 bytes/],
    [good.replace(/tag:[^,]+/, "tag:AAAA"), /tag that is not 16 bytes/],
    [good.replace("type:str", "type:banana"), /unknown type/],
    [good.replace("type:str", "type:comment"), /unknown type/],
    [`${good} trailing`, /is not an ENC/],
  ];
  for (const [value, pattern] of cases) refused(bytes({ ...JSON_DOC, foo: value }), "json", pattern);
});

test("metadata: mac, lastmodified, version, key groups, threshold", () => {
  refused(bytes(withSops(JSON_DOC, (s) => (s.mac = "garbage"))), "json", /mac is not an ENC/);
  refused(bytes(withSops(JSON_DOC, (s) => (s.mac = 5))), "json", /mac is not a string/);
  refused(bytes(withSops(JSON_DOC, (s) => delete s.mac)), "json", /no MAC/);
  refused(
    bytes(withSops(JSON_DOC, (s) => (s.mac = JSON_DOC.foo))),
    "json",
    /mac is not an encrypted SHA-512 digest/,
  );
  refused(bytes(withSops(JSON_DOC, (s) => (s.lastmodified = "yesterday"))), "json", /lastmodified/);
  refused(bytes(withSops(JSON_DOC, (s) => (s.version = "banana"))), "json", /version/);
  refused(bytes(withSops(JSON_DOC, (s) => (s.shamir_threshold = 99))), "json", /shamir_threshold is larger/);
  // Weakly typed by sops, held to the type sops writes.
  refused(
    bytes(withSops(JSON_DOC, (s) => (s.shamir_threshold = true))),
    "json",
    /shamir_threshold is not an integer/,
  );
  refused(
    bytes(withSops(JSON_DOC, (s) => (s.mac_only_encrypted = -1))),
    "json",
    /mac_only_encrypted is not a boolean/,
  );
  refused(bytes(withSops(JSON_DOC, (s) => (s.key_groups = "x"))), "json", /key_groups is not a list/);
  refused(
    bytes(withSops(BINARY, (s) => (s.unencrypted_suffix = 5))),
    "json",
    /unencrypted_suffix is not a string/,
  );
  refused(
    bytes(withSops(JSON_DOC, (s) => (s.key_groups = [[1, 2]]))),
    "json",
    /both top-level key lists and key_groups/,
  );
  refused(
    bytes(
      withSops(JSON_DOC, (s) => {
        s.key_groups = [[1, 2]];
        delete s.pgp;
      }),
    ),
    "json",
    /key_groups/,
  );
  refused(
    bytes(
      withSops(JSON_DOC, (s) => {
        s.key_groups = [{ pgp: s.pgp }, {}];
        s.shamir_threshold = 2;
        delete s.pgp;
      }),
    ),
    "json",
    /key group 2 has no keys/,
  );
  refused(
    bytes(withSops(JSON_DOC, (s) => ((s.pgp as { enc: string }[])[0]!.enc = ""))),
    "json",
    /pgp entry 1 has no enc/,
  );
  // Two groups, threshold 2: fine.
  loadValidated(
    bytes(
      withSops(JSON_DOC, (s) => {
        s.key_groups = [{ pgp: s.pgp }, { pgp: s.pgp }];
        s.shamir_threshold = 2;
        delete s.pgp;
      }),
    ),
    "json",
    KEY_KINDS,
  );
});

test("checkGroupsNamed: every group needs an accepted entry", () => {
  const two = withSops(JSON_DOC, (s) => {
    s.key_groups = [
      { pgp: s.pgp },
      {
        age: [
          {
            recipient: "age1foreign",
            enc: "-----BEGIN AGE ENCRYPTED FILE-----\nYWdl\n-----END AGE ENCRYPTED FILE-----\n",
          },
        ],
      },
    ];
    s.shamir_threshold = 1;
    delete s.pgp;
  });
  const { metadata } = loadEncrypted(bytes(two), "json", KEY_KINDS);
  checkGroupsNamed(metadata, () => true);
  assert.throws(
    () => checkGroupsNamed(metadata, (e) => e.kind === "pgp"),
    /key group 2 names none of the master keys/,
  );
});

test("L4: json or binary from what the MAC covers; extra uncovered keys beside data are refused", () => {
  const decide = (doc: unknown) => {
    const d = loadEncrypted(bytes(doc), "json", KEY_KINDS);
    return jsonStoreFormat(d.branches, d.metadata);
  };
  assert.equal(decide(BINARY), "binary");
  assert.equal(decide(JSON_DOC), "json");
  assert.equal(decide({ ...BINARY, other: JSON_DOC.foo }), "json", "a second covered key: JSON");
  for (const extra of ["", null, {}, [], { y: "" }, [null, ""]]) {
    assert.throws(() => decide({ ...BINARY, x: extra }), /binary or JSON cannot be decided/);
    assert.throws(() => loadJsonOrBinary(bytes({ ...BINARY, x: extra }), KEY_KINDS), /cannot be decided/);
    refused(bytes({ ...BINARY, x: extra }), "json", /cannot be decided/);
  }
  // With mac_only_encrypted, unencrypted leaves are outside the MAC too.
  const macOnly = withSops(BINARY, (s) => (s.mac_only_encrypted = true));
  assert.throws(() => decide({ ...macOnly, x_unencrypted: "visible" }), /cannot be decided/);
  assert.equal(decide({ ...BINARY, x_unencrypted: "visible" }), "json", "covered by the MAC: JSON");
  assert.equal(loadJsonOrBinary(bytes(BINARY), KEY_KINDS).codec.format, "binary");
  assert.equal(loadJsonOrBinary(bytes(JSON_DOC), KEY_KINDS).codec.format, "json");
});

test("an entry's enc must have its kind's shape (KeyKindFormat encSyntax)", () => {
  const pgp = withSops(JSON_DOC, (s) => ((s.pgp as { enc: string }[])[0]!.enc = "garbage"));
  refused(bytes(pgp), "json", /pgp entry 1 has an enc that is not a pgp ciphertext/);
  const entry = (kind: string, fields: Record<string, string>) =>
    withSops(JSON_DOC, (s) => {
      s[kind] = [{ created_at: "2026-05-22T20:16:08Z", ...fields }];
    });
  const cases: [string, Record<string, string>, string][] = [
    [
      "age",
      { recipient: "age1x" },
      "-----BEGIN AGE ENCRYPTED FILE-----\nYWdl\n-----END AGE ENCRYPTED FILE-----\n",
    ],
    ["kms", { arn: "arn:aws:kms:us-east-1:1:key/k" }, "AQIDBA=="],
    ["gcp_kms", { resource_id: "projects/p/locations/l/keyRings/r/cryptoKeys/k" }, "AQIDBAU="],
    ["azure_kv", { vault_url: "https://v", name: "k", version: "1" }, "AQIDBAU"],
    ["hc_vault", { vault_address: "http://v", engine_path: "transit", key_name: "k" }, "vault:v1:AQID"],
  ];
  for (const [kind, fields, enc] of cases) {
    loadValidated(bytes(entry(kind, { ...fields, enc })), "json", KEY_KINDS);
    refused(
      bytes(entry(kind, { ...fields, enc: "garbage!" })),
      "json",
      new RegExp(`${kind} entry 1 has an enc`),
    );
  }
});
