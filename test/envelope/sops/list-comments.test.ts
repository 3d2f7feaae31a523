/**
 * Comments inside YAML lists (issue #15): sops's walkSlice hands a list's comment to the
 * cipher like a value, so it is stored as the item `ENC[…,type:comment]` and decrypts back to
 * a comment outside the MAC (sops ≤ 3.13.1 and 3.13.3; 3.13.2 hashed it and failed its own
 * MAC). A document written by the real sops 3.13.3 (test/fixtures/yaml-list-comments) is the
 * reference; the interop file test/interop/sops-yaml-edge.test.ts checks the same live.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { KEY_KINDS, resolverFor } from "../../../providers/keys/index.ts";
import { emitEncrypted, loadEncrypted, loadValidated } from "../../../src/envelope/document.ts";
import { yamlCodec } from "../../../src/envelope/sops/codecs/yaml.ts";
import { decryptBranches, decryptDocument } from "../../../src/envelope/sops/decrypt.ts";
import type { Branch, Scalar, Sequence, Value } from "../../../src/envelope/sops/document.ts";
import { encryptBranches } from "../../../src/envelope/sops/encrypt.ts";
import type { Metadata, SelectionRule } from "../../../src/envelope/sops/metadata.ts";
import { BootsealError } from "../../../src/errors.ts";

const FIXTURES = fileURLToPath(new URL("../../fixtures/yaml-list-comments/", import.meta.url));
const fixture = (name: string): Uint8Array => new Uint8Array(readFileSync(`${FIXTURES}${name}`));
const utf8 = new TextEncoder();
const text = (b: Uint8Array): string => new TextDecoder().decode(b);
const LM = "2025-01-02T03:04:05Z";

function metadataFor(mac: string, rule: SelectionRule | null): Metadata {
  return { keyGroups: [], lastModified: LM, mac, rule, macOnlyEncrypted: false, version: "3.13.3" };
}

function roundTrip(plain: string, rule: SelectionRule | null = null) {
  const key = randomBytes(32);
  const branches = yamlCodec.parsePlain(utf8.encode(plain));
  const enc = encryptBranches(branches, key, { rule, lastModified: LM });
  const md = metadataFor(enc.mac, rule);
  return { key, branches, enc: enc.branches, md, out: decryptBranches(enc.branches, key, md) };
}

const listOf = (b: Branch, key: string): Sequence => {
  const e = b.items.find((i) => i.kind === "entry" && i.key === key);
  assert.ok(e?.kind === "entry" && e.value.kind === "seq");
  return e.value;
};
const isListComment = (v: Value | { kind: "comment" }): boolean =>
  v.kind === "scalar" &&
  v.type === "str" &&
  typeof v.value === "string" &&
  v.value.endsWith(",type:comment]");

describe("a document sops 3.13.3 wrote", () => {
  const deps = { env: { SOPS_AGE_KEY: text(fixture("age-test.agekey")) } };

  test("decrypts, MAC included, to exactly what sops 3.13.3 prints", async () => {
    const doc = loadEncrypted(fixture("list-comments.enc.yaml"), "yaml", KEY_KINDS);
    const plain = await decryptDocument(doc.branches, doc.metadata, { resolve: resolverFor(deps) });
    assert.equal(text(yamlCodec.emitPlain(plain)), text(fixture("list-comments.decrypted.yaml")));
  });

  test("passes the structural check (a list item of type comment is sealed)", () => {
    assert.doesNotThrow(() => loadValidated(fixture("list-comments.enc.yaml"), "yaml", KEY_KINDS));
  });

  test("re-encrypted by bootseal, it has sops's shape: same items, same ENC types", async () => {
    const doc = loadEncrypted(fixture("list-comments.enc.yaml"), "yaml", KEY_KINDS);
    const plain = await decryptDocument(doc.branches, doc.metadata, { resolve: resolverFor(deps) });
    const again = encryptBranches(plain, randomBytes(32), { rule: doc.metadata.rule, lastModified: LM });
    const shape = (bytes: Uint8Array): string =>
      text(bytes)
        .split("\nsops:\n")[0]!
        .replace(/ENC\[AES256_GCM,data:[^,]*,iv:[^,]*,tag:[^,]*,type:([a-z]+)\]/g, "ENC[$1]");
    const ours = emitEncrypted("yaml", again.branches, { ...doc.metadata, mac: again.mac }, KEY_KINDS);
    assert.equal(shape(ours), shape(fixture("list-comments.enc.yaml")));
  });
});

describe("encrypting a list comment", () => {
  test("makes it the list item ENC[…,type:comment]; a mapping comment stays a comment", () => {
    const { enc, out, branches } = roundTrip("list:\n  # c\n  - x\nmap:\n  # m\n  k: v\n");
    const list = listOf(enc[0]!, "list");
    assert.equal(list.items.length, 2);
    assert.ok(isListComment(list.items[0]!));
    const map = enc[0]!.items.find((i) => i.kind === "entry" && i.key === "map");
    assert.ok(map?.kind === "entry" && map.value.kind === "map" && map.value.items[0]?.kind === "comment");
    assert.deepEqual(out, branches);
  });

  test("keeps it out of the MAC: without the encrypted comment item the MAC still holds", () => {
    const key = randomBytes(32);
    const withComment = yamlCodec.parsePlain(utf8.encode("list:\n  # c\n  - x\n"));
    const without = yamlCodec.parsePlain(utf8.encode("list:\n  - x\n"));
    const enc = encryptBranches(withComment, key, { rule: null, lastModified: LM });
    const list = listOf(enc.branches[0]!, "list");
    const dropped: Branch = {
      kind: "map",
      items: [{ kind: "entry", key: "list", value: { ...list, items: list.items.slice(1) } }],
    };
    assert.deepEqual(decryptBranches([dropped], key, metadataFor(enc.mac, null)), without);
  });

  test('an empty comment becomes the item "" (sops\'s cipher leaves empty values empty)', () => {
    const { enc, out } = roundTrip("list:\n  #\n  - x\n");
    const first = listOf(enc[0]!, "list").items[0] as Scalar;
    assert.deepEqual(first, { kind: "scalar", type: "str", value: "" });
    assert.deepEqual(listOf(out[0]!, "list").items[0], { kind: "scalar", type: "str", value: "" });
  });

  test("an inline comment comes back as a comment line before its item, as in sops", () => {
    const { out } = roundTrip("list:\n  - x # note\n");
    assert.equal(text(yamlCodec.emitPlain(out)), "list:\n    # note\n    - x\n");
  });

  test("a list the rule leaves unencrypted keeps its comment as a comment", () => {
    const { enc } = roundTrip("list_unencrypted:\n  # c\n  - x\n");
    assert.deepEqual(listOf(enc[0]!, "list_unencrypted").items[0], { kind: "comment", text: " c" });
  });

  test("encrypted_comment_regex: a marked list comment fails the MAC, exactly as in sops 3.13.3", () => {
    // Encrypting, the second `# mark` is a comment and encrypted by the first; decrypting, it
    // is a value that resets the markers, so the item after it is not decrypted.
    const rule: SelectionRule = { kind: "encrypted_comment_regex", value: "^ ?mark" };
    assert.throws(() => roundTrip("k:\n  # mark\n  # mark\n  - false\n", rule), { code: "MAC_MISMATCH" });
  });
});

describe("decrypting an item of type comment", () => {
  test("as a mapping value is BAD_INPUT (sops has no comment values in mappings)", () => {
    const { key, enc, md } = roundTrip("list:\n  # c\n  - x\n");
    const item = listOf(enc[0]!, "list").items[0] as Value;
    const moved: Branch = { kind: "map", items: [{ kind: "entry", key: "list", value: item }] };
    assert.throws(
      () => decryptBranches([moved], key, md, { ignoreMac: true }),
      (err: unknown) => err instanceof BootsealError && err.code === "BAD_INPUT",
    );
  });

  test("with a flipped bit is rejected", () => {
    const { key, enc, md } = roundTrip("list:\n  # c\n  - x\n");
    const list = listOf(enc[0]!, "list");
    const item = list.items[0] as Scalar & { value: string };
    const flipped = item.value.replace(/data:(.)/, (_m, c: string) => `data:${c === "A" ? "B" : "A"}`);
    const tampered: Branch = {
      kind: "map",
      items: [
        {
          kind: "entry",
          key: "list",
          value: {
            ...list,
            items: [{ kind: "scalar", type: "str", value: flipped } satisfies Scalar, list.items[1]!],
          },
        },
      ],
    };
    // The value's own GCM tag fails first: sops's "Error decrypting tree" (exit 25), not the MAC.
    assert.throws(() => decryptBranches([tampered], key, md), { code: "DECRYPTION_FAILED" });
  });
});
