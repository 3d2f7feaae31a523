/** Smoke test of GnuPG: a round trip in a temporary GNUPGHOME, and a keyring without the key refused. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { peer } from "../helpers/peers.ts";
import { run, runOk, tempGnupgHome } from "./cli.ts";

test("gpg: encrypt to a new key and decrypt with it", (t) => {
  const gpg = peer("GPG_BIN");
  assert.match(runOk(gpg, ["--version"]), /^gpg \(GnuPG\) 2\.2\.40/);
  const alice = tempGnupgHome("bootseal smoke <alice@example.invalid>");
  const mallory = tempGnupgHome("bootseal smoke <mallory@example.invalid>");
  t.after(() => {
    alice.close();
    mallory.close();
  });

  const plaintext = "kubeadm join --token abcdef.0123456789abcdef\n";
  const armored = runOk(
    gpg,
    ["--batch", "--armor", "--trust-model", "always", "--encrypt", "-r", alice.fingerprint],
    {
      env: { GNUPGHOME: alice.home },
      input: plaintext,
    },
  );
  assert.match(armored, /^-----BEGIN PGP MESSAGE-----/);
  assert.ok(!armored.includes("kubeadm"));

  const decrypted = runOk(gpg, ["--batch", "--quiet", "--decrypt"], {
    env: { GNUPGHOME: alice.home },
    input: armored,
  });
  assert.equal(decrypted, plaintext);

  const refused = run(gpg, ["--batch", "--quiet", "--decrypt"], {
    env: { GNUPGHOME: mallory.home },
    input: armored,
  });
  assert.notEqual(refused.status, 0);
  assert.match(refused.stderr, /No secret key|decryption failed/);
});
