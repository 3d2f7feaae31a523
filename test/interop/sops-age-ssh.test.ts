/**
 * age SSH keys between bootseal and the real sops 3.13: a document encrypted by one tool to
 * an `ssh-ed25519` or `ssh-rsa` recipient (from --age, SOPS_AGE_RECIPIENTS or .sops.yaml)
 * decrypts with the other, from SOPS_AGE_SSH_PRIVATE_KEY_FILE or ~/.ssh/id_*.
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { parse } from "yaml";
import { type SshKeyPair, sshKeyPair } from "../providers/keys/age-ssh-keygen.ts";
import { createHarness, type Harness, ok } from "./harness.ts";

const PLAIN = "token: abcdef.0123456789abcdef\nnested:\n    port: 6443\n";

let h: Harness;
before(() => {
  h = createHarness();
});
after(() => h?.cleanup());

let n = 0;
function caseDir(pair: SshKeyPair): { dir: string; keyFile: string } {
  const dir = join(h.dir, `case${n++}`);
  mkdirSync(dir);
  const keyFile = join(dir, "id");
  writeFileSync(keyFile, pair.privateKey, { mode: 0o600 });
  writeFileSync(join(dir, "doc.yaml"), PLAIN);
  return { dir, keyFile };
}

/** Only the SSH key can open these documents: no age key file either tool could fall back on. */
const sshOnly = (keyFile: string) => ({ SOPS_AGE_KEY_FILE: "", SOPS_AGE_SSH_PRIVATE_KEY_FILE: keyFile });

const recipientsOf = (doc: Buffer) =>
  (parse(doc.toString()) as { sops: { age: { recipient: string }[] } }).sops.age.map((a) => a.recipient);

const PAIRS = [
  ["ssh-ed25519", () => sshKeyPair("ed25519")],
  ["ssh-rsa", () => sshKeyPair("rsa")],
] as const;

describe("age SSH keys: bootseal and sops", () => {
  for (const [name, make] of PAIRS) {
    for (const [writer, reader] of [
      ["sops", "bootseal"],
      ["bootseal", "sops"],
    ] as const) {
      test(`${name}: ${writer} encrypt --age, ${reader} decrypts with SOPS_AGE_SSH_PRIVATE_KEY_FILE`, async () => {
        const pair = make();
        const { dir, keyFile } = caseDir(pair);
        const recipient = pair.publicKey.trim();
        const enc = ok(
          await h[writer](["encrypt", "--age", recipient, "doc.yaml"], { cwd: dir }),
          `${writer} encrypt`,
        );
        // Both tools keep the whole public line (comment included) as the recipient.
        assert.deepEqual(recipientsOf(enc), [recipient]);
        writeFileSync(join(dir, "enc.yaml"), enc);
        const out = ok(
          await h[reader](["decrypt", "enc.yaml"], { cwd: dir, env: sshOnly(keyFile) }),
          `${reader} decrypt`,
        );
        assert.equal(out.toString(), PLAIN);
      });
    }
  }

  test("SOPS_AGE_RECIPIENTS and .sops.yaml take SSH recipients; both tools write the same recipients", async () => {
    const ed = sshKeyPair("ed25519");
    const rsa = sshKeyPair("rsa");
    const { dir, keyFile } = caseDir(ed);
    const rsaFile = join(dir, "id_rsa");
    writeFileSync(rsaFile, rsa.privateKey, { mode: 0o600 });
    writeFileSync(join(dir, ".sops.yaml"), `creation_rules:\n  - age: "${ed.recipient},${rsa.recipient}"\n`);
    const fromRule = await Promise.all(
      (["sops", "bootseal"] as const).map(async (tool) =>
        ok(await h[tool](["encrypt", "doc.yaml"], { cwd: dir }), tool),
      ),
    );
    assert.deepEqual(recipientsOf(fromRule[0] as Buffer), recipientsOf(fromRule[1] as Buffer));
    assert.deepEqual(recipientsOf(fromRule[1] as Buffer), [ed.recipient, rsa.recipient]);

    const other = join(h.dir, `norule${n++}`);
    mkdirSync(other);
    writeFileSync(join(other, "doc.yaml"), PLAIN);
    const viaEnv = { SOPS_AGE_RECIPIENTS: rsa.recipient };
    const fromEnv = ok(
      await h.bootseal(["encrypt", "doc.yaml"], { cwd: other, env: viaEnv }),
      "bootseal encrypt",
    );
    assert.deepEqual(recipientsOf(fromEnv), [rsa.recipient]);

    for (const [doc, file] of [
      [fromRule[0] as Buffer, keyFile],
      [fromRule[1] as Buffer, rsaFile],
      [fromEnv, rsaFile],
    ] as const) {
      writeFileSync(join(dir, "enc.yaml"), doc);
      for (const tool of ["sops", "bootseal"] as const) {
        const out = ok(
          await h[tool](["decrypt", "enc.yaml"], { cwd: dir, env: sshOnly(file) }),
          `${tool} decrypt`,
        );
        assert.equal(out.toString(), PLAIN);
      }
    }
  });

  test("~/.ssh/id_ed25519: both tools find the key there; neither opens a file for another SSH key", async () => {
    const pair = sshKeyPair("ed25519");
    const { dir } = caseDir(pair);
    const home = join(dir, "home");
    mkdirSync(join(home, ".ssh"), { recursive: true });
    writeFileSync(join(home, ".ssh", "id_ed25519"), pair.privateKey, { mode: 0o600 });
    const enc = ok(
      await h.sops(["encrypt", "--age", pair.recipient, "doc.yaml"], { cwd: dir }),
      "sops encrypt",
    );
    writeFileSync(join(dir, "enc.yaml"), enc);
    const env = { HOME: home, SOPS_AGE_KEY_FILE: "" };
    for (const tool of ["sops", "bootseal"] as const) {
      const out = ok(await h[tool](["decrypt", "enc.yaml"], { cwd: dir, env }), `${tool} decrypt`);
      assert.equal(out.toString(), PLAIN);
    }
    const stranger = sshKeyPair("ed25519");
    writeFileSync(join(home, ".ssh", "id_ed25519"), stranger.privateKey, { mode: 0o600 });
    const results = await Promise.all(
      (["sops", "bootseal"] as const).map((tool) => h[tool](["decrypt", "enc.yaml"], { cwd: dir, env })),
    );
    for (const r of results) assert.notEqual(r.status, 0);
    // Exit code 128 for both: no key could open the data key (sops CouldNotRetrieveKey).
    assert.deepEqual(
      results.map((r) => r.status),
      [128, 128],
    );
  });
});
