/**
 * Round trips against the real sops 3.13.2, both directions, for every format × key set ×
 * selection rule: what bootseal encrypts, `sops decrypt` opens to the bytes sops prints for
 * the plaintext; what `sops encrypt` writes, `bootseal decrypt` opens to those same bytes.
 * Key sets and rules come from a .sops.yaml in each case's directory, so both tools read the
 * same creation rule (and the two-group case needs one anyway).
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createHarness, type Harness, ok } from "./harness.ts";

const PLAINTEXTS: Record<string, { file: string; content: string }> = {
  yaml: {
    file: "doc.yaml",
    content: [
      "# top comment",
      "apiVersion: v1",
      "kind: Secret",
      "metadata:",
      "    name: demo",
      "    labels_unencrypted:",
      "        app: web",
      "data:",
      "    # the join token",
      "    token: abcdef.0123456789abcdef",
      "    port: 6443",
      "    ratio: 1.5",
      "    enabled: true",
      "stringData:",
      "    ca.crt: |",
      "        -----BEGIN CERTIFICATE-----",
      "        MIIB",
      "        -----END CERTIFICATE-----",
      "public_key: ssh-ed25519 AAAA",
      "db_secret: hunter2",
      "list:",
      "    - one",
      "    - 2",
      "    - nested: value",
      "empty: ''",
      "",
    ].join("\n"),
  },
  json: {
    file: "doc.json",
    content: `${JSON.stringify(
      {
        apiVersion: "v1",
        data: { token: "abcdef.0123456789abcdef", port: 6443, ratio: 1.5, enabled: true, none: null },
        stringData: { "ca.crt": "-----BEGIN CERTIFICATE-----\nMIIB\n" },
        public_key: "ssh-ed25519 AAAA",
        db_secret: "hunter2",
        name_unencrypted: "visible",
        list: ["one", 2, { nested: "value" }],
      },
      null,
      2,
    )}\n`,
  },
  dotenv: {
    file: "doc.env",
    content:
      "# bootstrap\nTOKEN=abcdef.0123456789abcdef\ndata=x=y\npublic_key=ssh-ed25519 AAAA\ndb_secret=hunter2\nNAME_unencrypted=visible\n",
  },
  ini: {
    file: "doc.ini",
    content:
      "; global settings\n[data]\ntoken = abcdef.0123456789abcdef\nport = 6443\n\n[public]\nkey = ssh-ed25519 AAAA\n\n[creds]\ndb_secret = hunter2\nname_unencrypted = visible\n",
  },
  binary: {
    file: "doc.bin",
    content: "#cloud-config\nruncmd:\n  - [kubeadm, join]\n\u0000\u00ff binary tail\n",
  },
};

type KeySet = "age" | "pgp" | "age+pgp";
const KEY_SETS: readonly KeySet[] = ["age", "pgp", "age+pgp"];

const RULES: Record<string, string | null> = {
  default: null,
  encrypted_regex: "encrypted_regex: ^(data|stringData|TOKEN|db_secret)$",
  unencrypted_regex: "unencrypted_regex: ^(public|apiVersion|kind)",
  encrypted_suffix: "encrypted_suffix: _secret",
  mac_only_encrypted: "mac_only_encrypted: true",
  encrypted_comment_regex: "encrypted_comment_regex: join token",
};

function rulesFor(format: string): string[] {
  if (format === "binary") return ["default"]; // sops 3.11+ ignores selection rules for binary
  if (format === "json") return Object.keys(RULES).filter((r) => r !== "encrypted_comment_regex");
  return Object.keys(RULES);
}

function sopsYaml(h: Harness, keys: KeySet, rule: string | null): string {
  const groups: Record<KeySet, string> = {
    age: `      - age:\n          - ${h.ageRecipient}\n`,
    pgp: `      - pgp:\n          - ${h.pgpFingerprint}\n`,
    "age+pgp": `      - age:\n          - ${h.ageRecipient}\n      - pgp:\n          - ${h.pgpFingerprint}\n`,
  };
  const threshold = keys === "age+pgp" ? "    shamir_threshold: 2\n" : "";
  return `creation_rules:\n  - key_groups:\n${groups[keys]}${threshold}${rule ? `    ${rule}\n` : ""}`;
}

let h: Harness;
before(() => {
  h = createHarness();
});
after(() => h?.cleanup());

for (const [format, plain] of Object.entries(PLAINTEXTS)) {
  describe(`sops interop: ${format}`, () => {
    for (const keys of KEY_SETS) {
      for (const rule of rulesFor(format)) {
        test(`${keys}, ${rule}`, async () => {
          const dir = join(h.dir, `${format}-${keys}-${rule}`);
          mkdirSync(dir);
          writeFileSync(join(dir, ".sops.yaml"), sopsYaml(h, keys, RULES[rule] ?? null));
          writeFileSync(join(dir, plain.file), plain.content);
          const opts = { cwd: dir };

          const bySops = ok(await h.sops(["encrypt", plain.file], opts), "sops encrypt");
          writeFileSync(join(dir, `sops-${plain.file}`), bySops);
          const reference = ok(
            await h.sops(["decrypt", `sops-${plain.file}`], opts),
            "sops decrypt (reference)",
          );

          const byUs = ok(await h.bootseal(["encrypt", plain.file], opts), "bootseal encrypt");
          writeFileSync(join(dir, `ours-${plain.file}`), byUs);
          if (rule !== "encrypted_comment_regex") {
            // Every other rule here selects db_secret; the comment rule selects only what follows "join token".
            assert.ok(!byUs.includes("hunter2"), "a selected secret never appears in plaintext");
          }

          const sopsOpensOurs = ok(
            await h.sops(["decrypt", `ours-${plain.file}`], opts),
            "sops decrypt of bootseal's file",
          );
          assert.equal(
            sopsOpensOurs.toString("latin1"),
            reference.toString("latin1"),
            "sops decrypts bootseal's file to the reference bytes",
          );

          const weOpenSops = ok(
            await h.bootseal(["decrypt", `sops-${plain.file}`], opts),
            "bootseal decrypt of sops's file",
          );
          assert.equal(
            weOpenSops.toString("latin1"),
            reference.toString("latin1"),
            "bootseal decrypts sops's file to the reference bytes",
          );

          const weOpenOurs = ok(
            await h.bootseal(["decrypt", `ours-${plain.file}`], opts),
            "bootseal decrypt of its own file",
          );
          assert.equal(weOpenOurs.toString("latin1"), reference.toString("latin1"));
        });
      }
    }
  });
}
