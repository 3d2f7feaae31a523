import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import { armor, Decrypter, Encrypter, generateX25519Identity, identityToRecipient } from "age-encryption";
import { isX25519Recipient, x25519Recipient } from "../../../providers/keys/age-x25519.ts";
import { BootsealError } from "../../../src/errors.ts";

// The real age CLI decrypts this recipient's wraps in test/providers/keys/age.test.ts ("our
// wrap decrypts with `age -d -i`"), a peer test: ageKey's wrap goes through x25519Recipient.

async function sealTo(recipient: string, secret: Uint8Array): Promise<Uint8Array> {
  const e = new Encrypter();
  e.addRecipient(x25519Recipient(recipient));
  return e.encrypt(secret);
}

describe("age X25519 recipient on node:crypto", () => {
  test("typage's own decrypter (WebCrypto X25519) opens what it wraps, through the armour too", async () => {
    const identity = await generateX25519Identity();
    const recipient = await identityToRecipient(identity);
    const secret = randomBytes(32);
    const d = new Decrypter();
    d.addIdentity(identity);
    assert.deepEqual(Buffer.from(await d.decrypt(await sealTo(recipient, secret))), secret);
    const armoured = armor.encode(await sealTo(recipient, secret));
    assert.deepEqual(Buffer.from(await d.decrypt(armor.decode(armoured))), secret);
  });

  test("another identity cannot open it; each wrap has its own ephemeral share", async () => {
    const recipient = await identityToRecipient(await generateX25519Identity());
    const other = new Decrypter();
    other.addIdentity(await generateX25519Identity());
    await assert.rejects(other.decrypt(await sealTo(recipient, randomBytes(32))));
    const r = x25519Recipient(recipient);
    const fileKey = randomBytes(16);
    const [a] = r.wrapFileKey(fileKey) as { args: string[]; body: Uint8Array }[];
    const [b] = r.wrapFileKey(fileKey) as { args: string[]; body: Uint8Array }[];
    assert.equal(a?.args[0], "X25519");
    assert.match(a?.args[1] ?? "", /^[A-Za-z0-9+/]{43}$/); // 32 bytes, unpadded base64
    assert.notEqual(a?.args[1], b?.args[1]);
    assert.equal(a?.body.length, 32); // 16-byte file key + Poly1305 tag
  });

  test("which recipients it takes; a malformed or low-order one is BAD_INPUT", async () => {
    const recipient = await identityToRecipient(await generateX25519Identity());
    assert.equal(isX25519Recipient(recipient), true);
    assert.equal(isX25519Recipient("age1pq1qqqq"), false);
    assert.equal(isX25519Recipient("age1yubikey1qqqq"), false);
    assert.equal(isX25519Recipient("ssh-ed25519 AAAA"), false);
    const bad = (err: unknown) => err instanceof BootsealError && err.code === "BAD_INPUT";
    assert.throws(
      () => x25519Recipient(`${recipient.slice(0, -1)}${recipient.endsWith("q") ? "p" : "q"}`),
      bad,
    );
    assert.throws(() => x25519Recipient(recipient.toUpperCase()), bad);
    // The all-zero point: X25519 with it gives the all-zero secret, which age refuses.
    const zero = "age1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq5cu47z";
    const e = new Encrypter();
    e.addRecipient(zero);
    await assert.rejects(e.encrypt(randomBytes(32))); // typage (WebCrypto) refuses it too
    assert.throws(() => x25519Recipient(zero).wrapFileKey(randomBytes(16)), bad);
  });
});
