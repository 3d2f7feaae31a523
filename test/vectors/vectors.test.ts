/**
 * Every document in test/fixtures/sops-vectors, driven by manifest.json: decrypts with its key to
 * exactly the expected values (and, where the vector has one, the exact output sops prints),
 * through the library and through the CLI, and byte-identically to the real `sops decrypt`.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { KEY_KINDS, resolverFor } from "../../providers/keys/index.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { plaintextBytes } from "../../src/envelope/sops/canonical.ts";
import type { Format } from "../../src/envelope/sops/codecs/codec.ts";
import { codecFor } from "../../src/envelope/sops/codecs/index.ts";
import { decryptDocument } from "../../src/envelope/sops/decrypt.ts";
import type { Branch, Value } from "../../src/envelope/sops/document.ts";
import { metadataFromTree } from "../../src/envelope/sops/metadata.ts";
import { peer } from "../helpers/peers.ts";

interface ManifestDoc {
  file: string;
  format: Format;
  keys: string[];
  expected: string;
  output?: string;
  reject?: string;
}
const here = dirname(fileURLToPath(import.meta.url));
const manifest = JSON.parse(readFileSync(join(here, "manifest.json"), "utf8")) as {
  root: string;
  keys: Record<string, { kind: string; file: string }>;
  documents: ManifestDoc[];
};
// Paths in the manifest are relative to its root, which is relative to the manifest itself.
const root = join(here, manifest.root);
const BOOTSEAL_MAIN = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "bootseal-vectors-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

function envFor(keyName: string): Record<string, string> {
  const key = manifest.keys[keyName];
  if (!key) throw new Error(`manifest names unknown key ${keyName}`);
  const file = join(root, key.file);
  // A fresh, empty GNUPGHOME and HOME: only the key named here may open the document.
  const home = mkdtempSync(join(scratch, "home-"));
  const base = { HOME: home, GNUPGHOME: join(home, "gnupg-none"), PATH: process.env.PATH ?? "" };
  return key.kind === "age" ? { ...base, SOPS_AGE_KEY_FILE: file } : { ...base, BOOTSEAL_PGP_KEY_FILE: file };
}

/** Leaves in walk order, in their canonical MAC form, as expected.json lists them. */
function leaves(branches: readonly Branch[]): string[] {
  const out: string[] = [];
  const visit = (v: Value) => {
    if (v.kind === "scalar") {
      const bytes = plaintextBytes(v);
      if (bytes !== null) out.push(Buffer.from(bytes).toString("latin1"));
    } else {
      for (const item of v.items) {
        if (item.kind === "comment") continue;
        visit(item.kind === "entry" ? item.value : item);
      }
    }
  };
  for (const b of branches) visit(b);
  return out;
}

for (const doc of manifest.documents) {
  describe(`vector ${doc.file}`, () => {
    const bytes = new Uint8Array(readFileSync(join(root, doc.file)));
    const expected = JSON.parse(readFileSync(join(root, doc.expected), "utf8")) as {
      leaves_in_mac_order: { plaintext: string }[];
    };

    for (const keyName of doc.keys) {
      test(`library, key ${keyName}`, async () => {
        const codec = codecFor(doc.format);
        const parsed = codec.parseEncrypted(bytes);
        const metadata = metadataFromTree(parsed.metadata, KEY_KINDS);
        const run = decryptDocument(parsed.branches, metadata, {
          resolve: resolverFor({ env: envFor(keyName) }),
        });
        if (doc.reject) {
          await assert.rejects(run, (err: { code?: string }) => err.code === doc.reject);
          return;
        }
        const plain = await run;
        const want = expected.leaves_in_mac_order.map((l) =>
          Buffer.from(l.plaintext, "utf8").toString("latin1"),
        );
        // Empty values are visited but hash nothing; expected.json lists them with "" too.
        assert.deepEqual(
          leaves(plain).filter((l) => l !== ""),
          want.filter((l) => l !== ""),
        );
        if (doc.output) {
          const out = codec.emitPlain(plain);
          assert.equal(
            Buffer.from(out).toString("latin1"),
            readFileSync(join(root, doc.output)).toString("latin1"),
          );
        }
      });
    }

    test("CLI output equals the real sops decrypt, byte for byte", () => {
      const env = envFor(doc.keys[0] as string);
      if (manifest.keys[doc.keys[0] as string]?.kind === "pgp") {
        // sops reads PGP private keys from a keyring only: import the key into a private one.
        const gnupg = join(env.HOME as string, "gnupg");
        spawnSync("mkdir", ["-m", "700", gnupg]);
        const imp = spawnSync(peer("GPG_BIN"), ["--batch", "--import", env.BOOTSEAL_PGP_KEY_FILE as string], {
          env: { ...env, GNUPGHOME: gnupg },
        });
        assert.equal(imp.status, 0, imp.stderr.toString());
        env.GNUPGHOME = gnupg;
      }
      const file = join(root, doc.file);
      const typeArgs = ["--input-type", doc.format, "--output-type", doc.format];
      const sops = spawnSync(peer("SOPS_BIN"), ["decrypt", ...typeArgs, file], { env });
      const ours = spawnSync(process.execPath, [BOOTSEAL_MAIN, "decrypt", ...typeArgs, file], { env });
      if (doc.reject) {
        assert.notEqual(sops.status, 0, "sops refuses it too");
        assert.equal(ours.status, EXIT_CODES.NO_MAC, ours.stderr.toString());
        assert.equal(ours.stdout.length, 0, "nothing on stdout");
        return;
      }
      assert.equal(sops.status, 0, sops.stderr.toString());
      assert.equal(ours.status, 0, ours.stderr.toString());
      assert.equal(ours.stdout.toString("latin1"), sops.stdout.toString("latin1"));
    });

    if (!doc.reject) {
      test("a flipped byte inside an encrypted value or the MAC is refused, with nothing printed", () => {
        const text = Buffer.from(bytes).toString("latin1");
        // The first encrypted VALUE: a comment that fails to decrypt is kept verbatim, as sops does.
        let at = -1;
        for (const m of text.matchAll(/ENC\[AES256_GCM,data:/g)) {
          const lineStart = text.lastIndexOf("\n", m.index) + 1;
          const before = text.slice(lineStart, m.index).trim();
          if (!before.endsWith("#") && !before.startsWith(";") && !before.startsWith("#")) {
            at = m.index + m[0].length + 1;
            break;
          }
        }
        assert.ok(at > 0, "the vector has an encrypted value");
        const tampered = text.slice(0, at) + (text[at] === "A" ? "B" : "A") + text.slice(at + 1);
        const path = join(scratch, `tampered-${doc.file.replaceAll("/", "_")}`);
        writeFileSync(path, Buffer.from(tampered, "latin1"));
        const env = envFor(doc.keys[0] as string);
        const ours = spawnSync(
          process.execPath,
          [BOOTSEAL_MAIN, "decrypt", "--input-type", doc.format, "--output-type", doc.format, path],
          { env },
        );
        // sops: 25 (ErrorDecryptingTree) for a value, 51 for the MAC.
        assert.equal(ours.status, EXIT_CODES.DECRYPTION_FAILED, ours.stderr.toString());
        assert.equal(ours.stdout.length, 0);
        assert.equal(ours.stderr.toString().trim().split("\n").length, 1, "one line");
      });
    }
  });
}
