/**
 * Every registered key kind, walked through everything that reads the registry: the sops
 * metadata (write + read an entry: field order, omit-empty, groups), the command-line flag
 * (flag/env/help, example -> key -> identity), `.sops.yaml` (a shorthand creation rule gives
 * the same identity), and the EncryptedConfig passphraseURI. A new kind gets all of this from
 * its provider file and its registry line; nothing here names a kind.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  DEFAULT_DECRYPTION_ORDER,
  KEY_KIND_NAMES,
  KEY_KINDS,
  KEY_TYPES,
  keyIdentity,
  keyTypeOf,
  resolverFor,
} from "../../../providers/keys/index.ts";
import { NO_SHORTHAND_CONTEXT } from "../../../providers/keys/key-type.ts";
import { KEY_FLAGS } from "../../../src/cli/key-flags.ts";
import { matchCreationRule, parseSopsConfig } from "../../../src/config/sops-config.ts";
import {
  formatPassphraseUri,
  parsePassphraseUri,
} from "../../../src/envelope/encrypted-config/passphrase-uri.ts";
import type { Entry, Mapping } from "../../../src/envelope/sops/document.ts";
import type { KeyEntry, KeyFieldValue } from "../../../src/envelope/sops/master-key.ts";
import { type Metadata, metadataFromTree, metadataToTree } from "../../../src/envelope/sops/metadata.ts";

const CREATED = "2026-01-02T03:04:05Z";

function metadata(groups: KeyEntry[][]): Metadata {
  return {
    keyGroups: groups,
    ...(groups.length > 1 ? { shamirThreshold: 2 } : {}),
    lastModified: CREATED,
    mac: "ENC[AES256_GCM,data:x,iv:y,tag:z,type:str]",
    rule: null,
    macOnlyEncrypted: false,
    version: "3.13.2",
  };
}

function entryItems(m: Mapping): Entry[] {
  return m.items.filter((i): i is Entry => i.kind === "entry");
}

function listOf(m: Mapping, key: string): Mapping[] | undefined {
  const found = entryItems(m).find((e) => e.key === key);
  if (found === undefined) return undefined;
  assert.equal(found.value.kind, "seq");
  return found.value.kind === "seq" ? (found.value.items as Mapping[]) : [];
}

/** The kind's example as a document would hold it: created_at where the kind has one, an enc. */
function documentEntry(kind: string, enc = "wrapped-bytes"): KeyEntry {
  const type = keyTypeOf(kind);
  assert.ok(type);
  const base = type.entryFromText(type.flag.example, NO_SHORTHAND_CONTEXT);
  assert.ok(base, `${kind}: the flag example parses`);
  const fields = new Map<string, KeyFieldValue>(base.fields);
  if (type.format.fields.includes("created_at")) fields.set("created_at", CREATED);
  for (const f of type.format.mapFields) fields.set(f, { b: "2", a: "1" });
  fields.set("enc", enc);
  return { kind, enc, fields };
}

test("the registry: unique kinds, ranks and flags; the default order is sops's", () => {
  assert.equal(new Set(KEY_KIND_NAMES).size, KEY_TYPES.length);
  for (const rank of ["readRank", "decryptionRank"] as const) {
    assert.equal(new Set(KEY_KINDS.map((k) => k[rank])).size, KEY_KINDS.length, rank);
  }
  assert.equal(new Set(KEY_TYPES.map((t) => t.flag.rank)).size, KEY_TYPES.length);
  assert.equal(new Set(KEY_TYPES.map((t) => t.config.shorthandKey)).size, KEY_TYPES.length);
  // sops's own default: age, then PGP, then the cloud services.
  assert.deepEqual(DEFAULT_DECRYPTION_ORDER.slice(0, 2), ["age", "pgp"]);
  assert.deepEqual(resolverFor().order, DEFAULT_DECRYPTION_ORDER);
  assert.deepEqual(
    KEY_FLAGS.map((f) => f.kind),
    [...KEY_TYPES].sort((a, b) => a.flag.rank - b.flag.rank).map((t) => t.kind),
  );
});

for (const type of KEY_TYPES) {
  const { kind, format, flag } = type;

  describe(`key kind ${kind}`, () => {
    test("metadata: an entry is written in the kind's field order and reads back equal", () => {
      const entry = documentEntry(kind);
      const tree = metadataToTree(metadata([[entry]]), KEY_KINDS);
      const written = listOf(tree, kind);
      assert.ok(written && written.length === 1, "the kind's list holds the entry");
      const names = entryItems(written[0] as Mapping).map((e) => e.key);
      const expected = format.fields.filter((f) => {
        const v = f === "enc" ? entry.enc : entry.fields.get(f);
        return !(format.omitEmpty.includes(f) && (v === undefined || v === ""));
      });
      assert.deepEqual(names, [...expected].sort());
      const back = metadataFromTree(tree, KEY_KINDS).keyGroups[0]?.[0];
      assert.ok(back);
      assert.equal(back.kind, kind);
      assert.equal(back.enc, entry.enc);
      assert.equal(format.identity(back), format.identity(entry));
      for (const f of format.fields) {
        if (f !== "created_at") assert.deepEqual(back.fields.get(f) ?? "", entry.fields.get(f) ?? "", f);
      }
    });

    test("metadata: omit-empty fields are dropped when empty, the others are always written", () => {
      const entry = documentEntry(kind);
      const fields = new Map(entry.fields);
      for (const f of format.fields) if (f !== "enc" && f !== "created_at") fields.delete(f);
      const tree = metadataToTree(metadata([[{ ...entry, fields }]]), KEY_KINDS);
      const names = entryItems(listOf(tree, kind)?.[0] as Mapping).map((e) => e.key);
      for (const f of format.fields) assert.equal(names.includes(f), !format.omitEmpty.includes(f), f);
    });

    test("metadata: an empty list in a key group exactly when sops writes one", () => {
      const other = KEY_TYPES.find((t) => t.kind !== kind);
      assert.ok(other);
      const tree = metadataToTree(metadata([[documentEntry(kind)], [documentEntry(other.kind)]]), KEY_KINDS);
      const groups = listOf(tree, "key_groups");
      assert.ok(groups?.length === 2);
      assert.equal(listOf(groups[1] as Mapping, kind) !== undefined, format.alwaysInGroup);
      assert.equal(listOf(tree, kind), undefined, "several groups: no top-level list");
    });

    test("flag: name, env and help; example -> key -> the entry's identity", () => {
      const f = KEY_FLAGS.find((k) => k.kind === kind);
      assert.ok(f, "KEY_FLAGS lists the kind");
      assert.match(f.flag, /^[a-z][a-z-]*$/);
      assert.match(f.env, /^SOPS_[A-Z_]+$/);
      assert.ok(f.help.length > 10 && !f.help.includes("\n"));
      assert.equal(f.short, flag.short);
      const [key, ...rest] = type.fromUserInput(`${flag.example},${flag.example}`, {});
      assert.ok(key && rest.length === 1, "comma-separated keys");
      assert.equal(key.kind, kind);
      const fromText = type.entryFromText(flag.example, NO_SHORTHAND_CONTEXT);
      assert.ok(fromText);
      assert.equal(key.id, format.identity(fromText));
      assert.equal(key.id, keyIdentity(key.toMetadata("x", new Date(CREATED))));
      assert.ok(key.id.length > 0);
    });

    test(".sops.yaml: a shorthand creation rule names the same key", () => {
      const text = `creation_rules:\n  - ${type.config.shorthandKey}: "${flag.example}"\n`;
      const rule = matchCreationRule(parseSopsConfig(text, "/r/.sops.yaml"), "/r", "/r/a.yaml");
      const entries = rule?.keyGroups[0] ?? [];
      assert.equal(entries.length, 1);
      assert.equal(entries[0]?.kind, kind);
      assert.equal(keyIdentity(entries[0] as KeyEntry), type.fromUserInput(flag.example, {})[0]?.id);
    });

    // A kind without a passphrase scheme (tpm: sealed to one machine) has no such test, not a skipped one.
    if (format.passphrase) {
      const passphrase = format.passphrase;
      test("passphraseURI: the kind's scheme round-trips key id and enc", () => {
        const key = type.fromUserInput(flag.example, {})[0];
        assert.ok(key);
        const enc = passphrase.wrapped === "text" ? "-----BEGIN X-----\nabc\n" : "AAECAwQF";
        const uri = formatPassphraseUri({ kind, keyId: key.id, enc }, KEY_KINDS);
        assert.ok(uri.startsWith(`${passphrase.scheme}://`));
        assert.deepEqual(parsePassphraseUri(uri, KEY_KINDS), { kind, keyId: key.id, enc });
      });
    }
  });
}
