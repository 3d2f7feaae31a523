/**
 * age SSH recipients and identities (providers/keys/age-ssh.ts), cross-checked with the real
 * age: what bootseal wraps to an SSH key, `age -d -i KEY` opens; what `age -R KEY.pub`
 * encrypts, bootseal opens from SOPS_AGE_SSH_PRIVATE_KEY_FILE or ~/.ssh.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { armor } from "age-encryption";
import { ageKeyType, loadAgeIdentities } from "../../../providers/keys/age.ts";
import type { ProviderDeps } from "../../../providers/keys/index.ts";
import { BootsealError } from "../../../src/errors.ts";
import { peer } from "../../helpers/peers.ts";
import { type SshKeyPair, sshKeyPair } from "./age-ssh-keygen.ts";

const dir = mkdtempSync(join(tmpdir(), "bootseal-age-ssh-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function code(c: string) {
  return (err: unknown) => err instanceof BootsealError && err.code === c;
}

function key(recipient: string, deps: ProviderDeps) {
  const [k] = ageKeyType.fromUserInput(recipient, deps);
  assert.ok(k);
  return k;
}

let n = 0;
function save(pair: SshKeyPair): string {
  const file = join(dir, `key${n++}`);
  writeFileSync(file, pair.privateKey, { mode: 0o600 });
  writeFileSync(`${file}.pub`, pair.publicKey);
  return file;
}

/** The real age decrypts an armoured age file with an SSH private key. */
function ageDecrypt(enc: string, identityFile: string): Buffer {
  return execFileSync(peer("AGE_BIN"), ["-d", "-i", identityFile], { input: enc });
}

/** The real age encrypts to an SSH public key file; armoured, as sops stores it. */
function ageEncrypt(secret: Uint8Array, pubFile: string): string {
  return execFileSync(peer("AGE_BIN"), ["-a", "-R", pubFile], { input: secret, encoding: "utf8" });
}

const KINDS = [
  ["ssh-ed25519", () => sshKeyPair("ed25519")],
  ["ssh-rsa (OpenSSH format)", () => sshKeyPair("rsa")],
  ["ssh-rsa (PKCS#1 PEM)", () => sshKeyPair("rsa", { pem: true })],
  ["ssh-rsa 3072", () => sshKeyPair("rsa", { bits: 3072 })],
] as const;

describe("age SSH keys against the real age", () => {
  for (const [name, make] of KINDS) {
    test(`${name}: bootseal wraps, age -d -i opens; age -R wraps, bootseal opens`, async () => {
      const pair = make();
      const file = save(pair);
      // The recipient as sops stores it: the whole public line, comment included.
      const recipient = pair.publicKey.trim();
      const secret = randomBytes(32);
      const enc = await key(recipient, {}).wrap(secret);
      assert.match(enc, /^-----BEGIN AGE ENCRYPTED FILE-----/);
      assert.deepEqual(ageDecrypt(enc, file), secret);

      const fromAge = ageEncrypt(secret, `${file}.pub`);
      const env = { SOPS_AGE_SSH_PRIVATE_KEY_FILE: file };
      assert.deepEqual(await key(recipient, { env }).unwrap(fromAge), Uint8Array.from(secret));
    });
  }

  test("~/.ssh/id_ed25519 and ~/.ssh/id_rsa are read when they exist", async () => {
    const home = join(dir, "home");
    mkdirSync(join(home, ".ssh"), { recursive: true });
    const ed = sshKeyPair("ed25519");
    const rsa = sshKeyPair("rsa");
    writeFileSync(join(home, ".ssh", "id_ed25519"), ed.privateKey, { mode: 0o600 });
    writeFileSync(join(home, ".ssh", "id_rsa"), rsa.privateKey, { mode: 0o600 });
    const secret = randomBytes(32);
    for (const pair of [ed, rsa]) {
      const enc = await key(pair.recipient, {}).wrap(secret);
      assert.deepEqual(
        await key(pair.recipient, { env: { HOME: home } }).unwrap(enc),
        Uint8Array.from(secret),
      );
    }
    const loaded = await loadAgeIdentities({ HOME: home });
    assert.equal(loaded.ssh.length, 2);
    assert.deepEqual(loaded.errors, []);
    // No SSH key anywhere: none loaded, and no error for the absent defaults.
    const empty = await loadAgeIdentities({ HOME: join(dir, "nohome") });
    assert.deepEqual([empty.ssh.length, empty.errors], [0, []]);
  });

  test("SOPS_AGE_SSH_PRIVATE_KEY_CMD gives the key, run with SOPS_AGE_RECIPIENT", async () => {
    const pair = sshKeyPair("ed25519");
    const file = save(pair);
    const enc = await key(pair.recipient, {}).wrap(Buffer.from("k"));
    const cmd = `sh -c 'test "$SOPS_AGE_RECIPIENT" = "${pair.recipient}" && cat ${file}'`;
    const env = { SOPS_AGE_SSH_PRIVATE_KEY_CMD: cmd, PATH: process.env.PATH };
    assert.deepEqual(await key(pair.recipient, { env }).unwrap(enc), Uint8Array.from(Buffer.from("k")));
  });

  test("the wrong SSH key: no match (null), not an error", async () => {
    const mine = sshKeyPair("ed25519");
    const other = sshKeyPair("rsa");
    const enc = await key(other.recipient, {}).wrap(Buffer.from("x"));
    const env = { SOPS_AGE_SSH_PRIVATE_KEY_FILE: save(mine) };
    assert.equal(await key(other.recipient, { env }).unwrap(enc), null);
  });

  test("a passphrase-protected key: UNSUPPORTED when its stanza matches, ignored otherwise", async () => {
    const locked = sshKeyPair("ed25519", { encrypted: true });
    const file = save(locked);
    const env = { SOPS_AGE_SSH_PRIVATE_KEY_FILE: file };
    const enc = await key(locked.recipient, {}).wrap(Buffer.from("x"));
    await assert.rejects(key(locked.recipient, { env }).unwrap(enc), (err: unknown) => {
      assert.ok(err instanceof BootsealError && err.code === "UNSUPPORTED");
      assert.match(err.message, /passphrase-protected/);
      return true;
    });
    // The same locked key next to a usable age identity for another stanza: no error.
    const other = sshKeyPair("rsa");
    const otherFile = save(other);
    const enc2 = await key(other.recipient, {}).wrap(Buffer.from("y"));
    const both = {
      ...env,
      HOME: join(dir, "none"),
      SOPS_AGE_SSH_PRIVATE_KEY_CMD: `cat ${otherFile}`,
      PATH: process.env.PATH,
    };
    assert.deepEqual(
      await key(other.recipient, { env: both }).unwrap(enc2),
      Uint8Array.from(Buffer.from("y")),
    );
  });

  test("bad recipients and key files are refused with a specific code", async () => {
    assert.throws(() => key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5", {}), code("BAD_INPUT"));
    assert.throws(() => key("ssh-ed25519 !!!", {}), code("BAD_INPUT"));
    const rsa = sshKeyPair("rsa");
    // The type named on the line must be the key's own.
    assert.throws(() => key(rsa.recipient.replace("ssh-rsa", "ssh-ed25519"), {}), code("BAD_INPUT"));
    const small = sshKeyPair("rsa", { bits: 1024 });
    assert.throws(() => key(small.recipient, {}), code("BAD_INPUT"));
    // An ssh-dss wire key: a real type age has no stanza for.
    const dss = Buffer.concat([Buffer.from([0, 0, 0, 7]), Buffer.from("ssh-dss"), Buffer.alloc(4)]);
    assert.throws(() => key(`ssh-dss ${dss.toString("base64")}`, {}), code("UNSUPPORTED"));

    const ed = sshKeyPair("ed25519");
    const junk = join(dir, "junk");
    writeFileSync(junk, "not a key\n");
    const enc = await key(ed.recipient, {}).wrap(Buffer.from("x"));
    const loaded = await loadAgeIdentities({ SOPS_AGE_SSH_PRIVATE_KEY_FILE: junk });
    assert.equal(loaded.ssh.length, 0);
    assert.equal(loaded.errors[0]?.code, "BAD_INPUT");
    // The failing source is named in the error; the key material never is.
    await assert.rejects(
      key(ed.recipient, { env: { SOPS_AGE_SSH_PRIVATE_KEY_FILE: junk } }).unwrap(enc),
      (err) => {
        assert.ok(err instanceof BootsealError);
        assert.match(err.message, /SSH private key/);
        return true;
      },
    );
  });

  test("a tampered ssh-ed25519 stanza is BAD_INPUT, a tampered body is no match", async () => {
    const pair = sshKeyPair("ed25519");
    const env = { SOPS_AGE_SSH_PRIVATE_KEY_FILE: save(pair) };
    const enc = await key(pair.recipient, {}).wrap(Buffer.from("x"));
    const bytes = Buffer.from(armor.decode(enc));
    const text = bytes.toString("latin1");
    const stanza = /-> ssh-ed25519 (\S+) (\S+)\n(\S+)\n/.exec(text);
    assert.ok(stanza);
    const short = text.replace(`${stanza[2]}\n`, `${stanza[2]?.slice(0, 10)}\n`);
    await assert.rejects(
      key(pair.recipient, { env }).unwrap(armor.encode(Buffer.from(short, "latin1"))),
      code("BAD_INPUT"),
    );
    const body = stanza[3] as string;
    const flipped = text.replace(`\n${body}\n`, `\n${body[0] === "A" ? "B" : "A"}${body.slice(1)}\n`);
    assert.equal(
      await key(pair.recipient, { env }).unwrap(armor.encode(Buffer.from(flipped, "latin1"))),
      null,
    );
  });
});
