/**
 * age files on node:crypto (providers/keys/age-x25519-file.ts) against two independent
 * implementations: the real `age` (the age peer, filippo.io/age) and typage (age-encryption).
 * Files this module writes open in both; files both write open here; tampering is refused;
 * whatever it does not read itself (another stanza type, a looser armour) is UNSUPPORTED,
 * for ./age.ts to hand to typage.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { armor, Decrypter, Encrypter, generateX25519Identity, identityToRecipient } from "age-encryption";
import {
  decryptWithX25519,
  encryptToX25519,
  UNSUPPORTED,
  x25519IdentityKey,
  x25519RecipientBytes,
} from "../../../providers/keys/age-x25519-file.ts";
import { tempDir } from "../../fetcher/helpers.ts";
import { peer } from "../../helpers/peers.ts";

const run = promisify(execFile);
let dir: { path: string; remove: () => Promise<void> };
let identity: string;
let recipient: string;
let keyFile: string;

before(async () => {
  dir = await tempDir("age-x25519");
  keyFile = join(dir.path, "key.txt");
  await run(peer("AGE_KEYGEN_BIN"), ["-o", keyFile]);
  identity = ((await readFile(keyFile, "utf8")).match(/^AGE-SECRET-KEY-1\S+$/m) as RegExpMatchArray)[0];
  recipient = await identityToRecipient(identity);
});
after(async () => {
  await dir?.remove();
});

async function ageDecrypt(armored: string): Promise<Buffer> {
  const file = join(dir.path, `in-${randomBytes(4).toString("hex")}.age`);
  await writeFile(file, armored);
  const { stdout } = await run(peer("AGE_BIN"), ["-d", "-i", keyFile, file], { encoding: "buffer" });
  return stdout;
}

async function ageEncrypt(payload: Buffer, recipients: string[]): Promise<string> {
  const file = join(dir.path, `in-${randomBytes(4).toString("hex")}.bin`);
  await writeFile(file, payload);
  const args = ["-e", "-a", ...recipients.flatMap((r) => ["-r", r]), file];
  return (await run(peer("AGE_BIN"), args)).stdout;
}

async function typageDecrypt(armored: string, ids: string[]): Promise<Buffer> {
  const d = new Decrypter();
  for (const id of ids) d.addIdentity(id);
  return Buffer.from(await d.decrypt(armor.decode(armored)));
}

test("written here, opened by the real age and by typage: a 32-byte data key, an empty payload, one of 200 KiB (four STREAM chunks)", async () => {
  for (const payload of [randomBytes(32), Buffer.alloc(0), randomBytes(200 * 1024)]) {
    const armored = encryptToX25519(payload, [recipient]);
    assert.match(
      armored,
      /^-----BEGIN AGE ENCRYPTED FILE-----\n([A-Za-z0-9+/=]{64}\n)*[A-Za-z0-9+/=]{1,64}\n-----END AGE ENCRYPTED FILE-----\n$/,
    );
    assert.deepEqual(await ageDecrypt(armored), payload);
    assert.deepEqual(await typageDecrypt(armored, [identity]), payload);
  }
});

test("written by the real age and by typage (one and three recipients), opened here; another identity finds no stanza (null)", async () => {
  const other = await generateX25519Identity();
  const third = await generateX25519Identity();
  const payload = randomBytes(32);
  const byAge = await ageEncrypt(payload, [recipient]);
  assert.deepEqual(Buffer.from(decryptWithX25519(byAge, [identity]) as Uint8Array), payload);
  const many = await ageEncrypt(payload, [
    await identityToRecipient(other),
    await identityToRecipient(third),
    recipient,
  ]);
  assert.deepEqual(Buffer.from(decryptWithX25519(many, [other]) as Uint8Array), payload);
  assert.deepEqual(Buffer.from(decryptWithX25519(many, [identity]) as Uint8Array), payload);
  const e = new Encrypter();
  e.addRecipient(recipient);
  const byTypage = armor.encode(await e.encrypt(payload));
  assert.deepEqual(Buffer.from(decryptWithX25519(byTypage, [identity]) as Uint8Array), payload);
  assert.equal(decryptWithX25519(byAge, [other]), null);
  // CRLF line ends and surrounding blank lines, as a file edited on Windows has them.
  assert.deepEqual(
    Buffer.from(decryptWithX25519(`\n${byAge.replace(/\n/g, "\r\n")}\n`, [identity]) as Uint8Array),
    payload,
  );
});

test("tampering: a changed header (MAC) or payload byte is BAD_INPUT; a changed stanza body finds no key", async () => {
  const armored = encryptToX25519(randomBytes(32), [recipient]);
  const file = armor.decode(armored);
  const headerEnd = Buffer.from(file).indexOf("\n---") + 1;
  const flip = (at: number) => {
    const copy = Buffer.from(file);
    copy[at] = (copy[at] as number) ^ 1;
    return armor.encode(copy);
  };
  // The version line's last byte: the MAC covers it.
  const versionEnd = Buffer.from(file).indexOf("\n") - 1;
  assert.equal(
    decryptWithX25519(flip(versionEnd), [identity]),
    UNSUPPORTED,
    "another version line is typage's to refuse",
  );
  // A MAC character swapped for another (A and B differ in their low bit: still canonical base64).
  const swap = (at: number) => {
    const copy = Buffer.from(file);
    copy[at] = copy[at] === 0x41 ? 0x42 : 0x41;
    return armor.encode(copy);
  };
  const macByte = Buffer.from(file).indexOf("\n", headerEnd) - 2;
  assert.throws(() => decryptWithX25519(swap(macByte), [identity]), /MAC does not verify/);
  assert.throws(() => decryptWithX25519(flip(file.length - 1), [identity]), /payload does not verify/);
  // The stanza body's first character: another (canonical) sealed key the identity cannot open.
  const bodyLine = Buffer.from(file).indexOf("\n") + 1;
  const bodyStart = Buffer.from(file).indexOf("\n", bodyLine) + 1;
  const changed = armor.decode(swap(bodyStart));
  assert.equal(decryptWithX25519(armor.encode(changed), [identity]), null);
});

test("what this reader leaves to typage: a scrypt stanza, a non-canonical armour, not an armour; identities and recipients it takes", async () => {
  const e = new Encrypter();
  e.setPassphrase("correct horse");
  const scrypt = armor.encode(await e.encrypt(randomBytes(32)));
  assert.equal(decryptWithX25519(scrypt, [identity]), UNSUPPORTED);
  const byAge = await ageEncrypt(randomBytes(32), [recipient]);
  // The same file in 60-column lines: age's own reader refuses it too (typage says why).
  const lines = byAge.trim().split("\n");
  const body = lines.slice(1, -1).join("");
  const narrow = [lines[0], ...(body.match(/.{1,60}/g) as string[]), lines.at(-1)].join("\n");
  assert.equal(decryptWithX25519(narrow, [identity]), UNSUPPORTED);
  assert.equal(decryptWithX25519("not an age file", [identity]), UNSUPPORTED);
  assert.ok(x25519IdentityKey(identity));
  assert.equal(x25519IdentityKey(identity.toLowerCase()), null, "lower case: typage decides");
  assert.equal(x25519IdentityKey(`${identity.slice(0, -1)}Q`), null, "a bad checksum");
  assert.equal(x25519RecipientBytes(recipient)?.length, 32);
  assert.equal(x25519RecipientBytes(recipient.toUpperCase()), null);
  assert.equal(x25519RecipientBytes(`${recipient.slice(0, -1)}q`), null);
  assert.throws(() => encryptToX25519(randomBytes(32), ["age1qqqq"]), /invalid recipient/);
});
