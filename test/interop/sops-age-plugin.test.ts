/**
 * age plugins side by side with the real sops 3.13.3 (its client is filippo.io/age/plugin):
 * - the REAL plugin age-plugin-batchpass (filippo.io/age v1.3.1, peer age-plugin-batchpass):
 *   an `AGE-PLUGIN-BATCHPASS-1…` identity in SOPS_AGE_KEY opens a document whose age entry is
 *   a scrypt stanza (identity-v1), for both tools; a wrong passphrase fails in both with the
 *   same exit code; its recipient `age1batchpass1…` is refused by the plugin itself
 *   ("recipient encodings not supported") in both.
 * - the TEST DOUBLE plugin test/fakes/age-plugin-double.ts, for the recipient side no real
 *   plugin here offers: each tool encrypts to `age1double1…` (flag and .sops.yaml) and the
 *   other decrypts with `AGE-PLUGIN-DOUBLE-1…`.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { armor, Encrypter } from "age-encryption";
import { KEY_KINDS } from "../../providers/keys/index.ts";
import { codecFor } from "../../src/envelope/sops/codecs/index.ts";
import { encryptDocument } from "../../src/envelope/sops/encrypt.ts";
import type { KeyEntry, MasterKey } from "../../src/envelope/sops/master-key.ts";
import { metadataToTree } from "../../src/envelope/sops/metadata.ts";
import { type ChildResult, runChild } from "../helpers/child.ts";
import { peer } from "../helpers/peers.ts";
import { BOOTSEAL_MAIN, ok } from "./harness.ts";

const PLAIN = "join_token: abcdef.0123456789abcdef\nnested:\n    port: 6443\n";
// plugin.EncodeIdentity("batchpass", nil) and plugin.EncodeRecipient("batchpass", nil) of filippo.io/age v1.3.1.
const BATCHPASS_IDENTITY = "AGE-PLUGIN-BATCHPASS-1JCS0Q9";
const BATCHPASS_RECIPIENT = "age1batchpass1s48w5f";
const DOUBLE = fileURLToPath(new URL("../fakes/age-plugin-double.ts", import.meta.url));

const dir = mkdtempSync(join(tmpdir(), "bootseal-age-plugin-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const bin = join(dir, "bin");
mkdirSync(bin);
writeFileSync(join(bin, "age-plugin-double"), `#!/bin/sh\nexec '${process.execPath}' '${DOUBLE}' "$@"\n`);
chmodSync(join(bin, "age-plugin-double"), 0o755);
writeFileSync(join(dir, "plain.yaml"), PLAIN);

function env(over: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: `${bin}:${peer("AGE_PLUGIN_DIR")}:${process.env.PATH}`,
    HOME: dir,
    ...over,
  };
}
const sops = (args: string[], e: NodeJS.ProcessEnv, cwd = dir): Promise<ChildResult> =>
  runChild(peer("SOPS_3_13_3_BIN"), args, { env: e, cwd });
const bootseal = (args: string[], e: NodeJS.ProcessEnv, cwd = dir): Promise<ChildResult> =>
  runChild(process.execPath, [BOOTSEAL_MAIN, ...args], { env: e, cwd });

describe("age plugin: the real age-plugin-batchpass (identity side)", () => {
  /** A document whose one age entry is a scrypt stanza under `passphrase` (what batchpass opens). */
  async function scryptDocument(passphrase: string): Promise<string> {
    const key: MasterKey = {
      kind: "age",
      id: BATCHPASS_RECIPIENT,
      async wrap(secret) {
        const e = new Encrypter();
        e.setPassphrase(passphrase);
        e.setScryptWorkFactor(10);
        return armor.encode(await e.encrypt(secret));
      },
      unwrap: async () => null,
      toMetadata: (enc): KeyEntry => ({
        kind: "age",
        enc,
        fields: new Map([
          ["recipient", BATCHPASS_RECIPIENT],
          ["enc", enc],
        ]),
      }),
    };
    const yaml = codecFor("yaml");
    const { branches, metadata } = await encryptDocument(yaml.parsePlain(Buffer.from(PLAIN)), {
      keyGroups: [[key]],
    });
    return Buffer.from(yaml.emitEncrypted(branches, metadataToTree(metadata, KEY_KINDS))).toString("utf8");
  }

  test("SOPS_AGE_KEY=AGE-PLUGIN-BATCHPASS-1…: both tools open it; a wrong passphrase fails both alike", async () => {
    writeFileSync(join(dir, "scrypt.yaml"), await scryptDocument("correct horse"));
    const right = env({ SOPS_AGE_KEY: BATCHPASS_IDENTITY, AGE_PASSPHRASE: "correct horse" });
    assert.equal(ok(await sops(["decrypt", "scrypt.yaml"], right), "sops decrypt").toString(), PLAIN);
    assert.equal(ok(await bootseal(["decrypt", "scrypt.yaml"], right), "bootseal decrypt").toString(), PLAIN);

    const wrong = env({ SOPS_AGE_KEY: BATCHPASS_IDENTITY, AGE_PASSPHRASE: "wrong" });
    const [s, b] = await Promise.all([
      sops(["decrypt", "scrypt.yaml"], wrong),
      bootseal(["decrypt", "scrypt.yaml"], wrong),
    ]);
    assert.notEqual(s.status, 0);
    assert.equal(b.status, s.status, `sops: ${s.stderr}\nbootseal: ${b.stderr}`);
    assert.match(s.stderr, /incorrect passphrase/);
    assert.match(b.stderr, /incorrect passphrase/);
  });

  test("its recipient age1batchpass1…: the plugin refuses it in both, with the same exit code", async () => {
    const [s, b] = await Promise.all([
      sops(["encrypt", "--age", BATCHPASS_RECIPIENT, "plain.yaml"], env()),
      bootseal(["encrypt", "--age", BATCHPASS_RECIPIENT, "plain.yaml"], env()),
    ]);
    assert.notEqual(s.status, 0);
    assert.equal(b.status, s.status, `sops: ${s.stderr}\nbootseal: ${b.stderr}`);
    assert.match(s.stderr, /recipient encodings not supported/);
    assert.match(b.stderr, /recipient encodings not supported/);
  });

  test("no age-plugin-NAME on PATH: both fail with the same exit code", async () => {
    const e = env({
      PATH: "/usr/bin:/bin",
      SOPS_AGE_KEY: BATCHPASS_IDENTITY,
      AGE_PASSPHRASE: "correct horse",
    });
    const [s, b] = await Promise.all([
      sops(["decrypt", "scrypt.yaml"], e),
      bootseal(["decrypt", "scrypt.yaml"], e),
    ]);
    assert.notEqual(s.status, 0);
    assert.equal(b.status, s.status, `sops: ${s.stderr}\nbootseal: ${b.stderr}`);
  });
});

describe("age plugin: the test double age-plugin-double (recipient side)", () => {
  const [recipient, identity] = execFileSync(process.execPath, [DOUBLE, "--keygen"], { encoding: "utf8" })
    .trim()
    .split(" ") as [string, string];

  test("--age age1double1…: each tool decrypts the other's file with AGE-PLUGIN-DOUBLE-1…", async () => {
    const bySops = ok(
      await sops(["encrypt", "--age", recipient, "plain.yaml"], env()),
      "sops encrypt",
    ).toString();
    const byUs = ok(
      await bootseal(["encrypt", "--age", recipient, "plain.yaml"], env()),
      "bootseal encrypt",
    ).toString();
    for (const doc of [bySops, byUs]) {
      assert.ok(doc.includes(`recipient: ${recipient}`));
      assert.ok(doc.includes("-----BEGIN AGE ENCRYPTED FILE-----"));
    }
    writeFileSync(join(dir, "double-sops.yaml"), bySops);
    writeFileSync(join(dir, "double-us.yaml"), byUs);
    const withId = env({ SOPS_AGE_KEY: identity });
    assert.equal(
      ok(await bootseal(["decrypt", "double-sops.yaml"], withId), "bootseal decrypt").toString(),
      PLAIN,
    );
    assert.equal(ok(await sops(["decrypt", "double-us.yaml"], withId), "sops decrypt").toString(), PLAIN);
  });

  test(".sops.yaml age: recipient, and an identity in SOPS_AGE_KEY_FILE beside a native key", async () => {
    const rules = join(dir, "rules");
    mkdirSync(rules, { recursive: true });
    writeFileSync(join(rules, ".sops.yaml"), `creation_rules:\n  - age: ${recipient}\n`);
    writeFileSync(join(rules, "a.yaml"), PLAIN);
    const byUs = ok(await bootseal(["encrypt", "a.yaml"], env(), rules), "bootseal encrypt").toString();
    writeFileSync(join(rules, "a.enc.yaml"), byUs);
    const keyFile = join(dir, "keys.txt");
    const native = execFileSync(peer("AGE_KEYGEN_BIN"), {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    })
      .split("\n")
      .find((l) => l.startsWith("AGE-SECRET-KEY-"));
    writeFileSync(keyFile, `# native first\n${native}\n${identity}\n`);
    const withFile = env({ SOPS_AGE_KEY_FILE: keyFile });
    assert.equal(
      ok(await sops(["decrypt", "a.enc.yaml"], withFile, rules), "sops decrypt").toString(),
      PLAIN,
    );
    assert.equal(
      ok(await bootseal(["decrypt", "a.enc.yaml"], withFile, rules), "bootseal decrypt").toString(),
      PLAIN,
    );
  });
});
