/**
 * Smoke test of the real sops 3.13.2: --version, and a small YAML encrypted to an age key and a
 * PGP key (temporary GNUPGHOME), decrypted with each of them alone.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { peer } from "../helpers/peers.ts";
import { run, runOk, tempDir, tempGnupgHome } from "./cli.ts";

// sops writes YAML with 4-space indentation: written that way, the round trip is byte-exact.
const plainYaml =
  "bootstrap:\n    token: abcdef.0123456789abcdef\n    caHash: sha256:1234\nnodeName: worker-0\n";

// sops reads these: keep the ones of the developer's shell out of the test.
const clean = {
  SOPS_AGE_KEY: undefined,
  SOPS_AGE_KEY_FILE: undefined,
  SOPS_AGE_KEY_CMD: undefined,
  SOPS_PGP_FP: undefined,
  SOPS_AGE_RECIPIENTS: undefined,
};

test("sops: version", () => {
  const out = runOk(peer("SOPS_BIN"), ["--version", "--disable-version-check"]);
  assert.match(out, /^sops 3\.13\.2\b/);
});

test("sops: YAML encrypted to age + PGP decrypts with either key", (t) => {
  const sops = peer("SOPS_BIN");
  const { dir, remove } = tempDir("sops");
  const gnupg = tempGnupgHome("bootseal sops smoke <sops@example.invalid>");
  const emptyGnupg = tempDir("gnupg-empty");
  t.after(() => {
    gnupg.close();
    emptyGnupg.remove();
    remove();
  });
  const ageKey = join(dir, "age.txt");
  runOk(peer("AGE_KEYGEN_BIN"), ["-o", ageKey]);
  const recipient = runOk(peer("AGE_KEYGEN_BIN"), ["-y", ageKey]).trim();
  const plainFile = join(dir, "secret.yaml");
  writeFileSync(plainFile, plainYaml);

  const encrypted = runOk(sops, ["encrypt", "--age", recipient, "--pgp", gnupg.fingerprint, plainFile], {
    env: { ...clean, GNUPGHOME: gnupg.home },
  });
  assert.match(encrypted, /token: ENC\[AES256_GCM,data:[^,]+,iv:[^,]+,tag:[^,]+,type:str\]/);
  assert.ok(!encrypted.includes("abcdef.0123456789abcdef"));
  assert.match(encrypted, new RegExp(`\\n {10}recipient: ${recipient}\\n`));
  assert.match(encrypted, new RegExp(`fp: ${gnupg.fingerprint}`));
  assert.match(encrypted, /\n {4}version: 3\.13\.2\n/);
  const encFile = join(dir, "secret.enc.yaml");
  writeFileSync(encFile, encrypted);

  // age alone (the PGP keyring is empty)
  const viaAge = runOk(sops, ["decrypt", encFile], {
    env: { ...clean, SOPS_AGE_KEY_FILE: ageKey, GNUPGHOME: emptyGnupg.dir },
  });
  assert.equal(viaAge, plainYaml);

  // PGP alone (no age key)
  const viaPgp = runOk(sops, ["decrypt", encFile], {
    env: { ...clean, SOPS_AGE_KEY_FILE: join(dir, "missing.txt"), GNUPGHOME: gnupg.home },
  });
  assert.equal(viaPgp, plainYaml);

  // neither: refused, no plaintext
  const neither = run(sops, ["decrypt", encFile], {
    env: { ...clean, SOPS_AGE_KEY_FILE: join(dir, "missing.txt"), GNUPGHOME: emptyGnupg.dir },
  });
  assert.equal(neither.status, 128);
  assert.match(neither.stderr, /Failed to get the data key required to decrypt the SOPS file/);
  assert.equal(neither.stdout, "");

  // a tampered value fails the MAC check
  const tampered = encrypted.replace(
    /(nodeName: ENC\[AES256_GCM,data:)(.)/,
    (_m, pre: string, c: string) => pre + (c === "A" ? "B" : "A"),
  );
  assert.notEqual(tampered, encrypted);
  writeFileSync(encFile, tampered);
  const bad = run(sops, ["decrypt", encFile], {
    env: { ...clean, SOPS_AGE_KEY_FILE: ageKey, GNUPGHOME: emptyGnupg.dir },
  });
  assert.notEqual(bad.status, 0);
  assert.equal(bad.stdout, "");
});
