/**
 * age's native X25519 recipient (age-encryption.org/v1, "X25519" stanza) on node:crypto.
 * typage's own X25519Recipient goes through WebCrypto: per wrap it imports the ephemeral
 * scalar twice (PKCS #8) and the peer twice, and awaits two deriveBits jobs; that was 14 %
 * of the service's CPU in a publish (docs/benchmarks.md, issue #33). Here the recipient's
 * key object is made once per recipient, and a wrap is one key pair, one X25519, one HKDF
 * and one ChaCha20-Poly1305 seal, synchronously. The stanza is the same bytes as age's:
 * `-> X25519 <ephemeral share>` and the sealed file key.
 */
import {
  createCipheriv,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  type KeyObject,
} from "node:crypto";
import { type Recipient, Stanza } from "age-encryption";
import { BootsealError } from "../../src/errors.ts";
import { bech32Decode } from "./age-plugin.ts";

/** SubjectPublicKeyInfo of an X25519 key, up to the 32 key bytes (RFC 8410). */
const SPKI_PREFIX = Buffer.from("302a300506032b656e032100", "hex");
const LABEL = Buffer.from("age-encryption.org/v1/X25519");
const ZERO_NONCE = Buffer.alloc(12);

/** `age1…` with a single '1' (Bech32 data has none): not a plugin, tag or hybrid recipient. */
export function isX25519Recipient(recipient: string): boolean {
  return recipient.startsWith("age1") && recipient.indexOf("1", 4) < 0;
}

interface RecipientKey {
  readonly bytes: Buffer;
  readonly key: KeyObject;
}

/** Recipients come from the creation rules: few, and each used by every publish. */
const keys = new Map<string, RecipientKey>();
const MAX_KEYS = 1024;

function recipientKey(recipient: string): RecipientKey {
  let found = keys.get(recipient);
  if (found === undefined) {
    const decoded = bech32Decode(recipient);
    if (
      decoded === null ||
      recipient !== recipient.toLowerCase() ||
      decoded.hrp !== "age" ||
      decoded.data.length !== 32
    )
      throw new BootsealError("BAD_INPUT", `age: invalid recipient: ${recipient}`);
    const bytes = Buffer.from(decoded.data);
    const key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, bytes]), format: "der", type: "spki" });
    found = { bytes, key };
    if (keys.size >= MAX_KEYS) keys.clear();
    keys.set(recipient, found);
  }
  return found;
}

/** age's X25519 recipient for an `age1…` string (isX25519Recipient). */
export function x25519Recipient(recipient: string): Recipient {
  const { bytes, key } = recipientKey(recipient);
  return {
    wrapFileKey(fileKey: Uint8Array): Stanza[] {
      const ephemeral = generateKeyPairSync("x25519");
      // JWK: the cheapest export of the 32 raw bytes (46 against 69 µs per wrap with DER).
      const share = Buffer.from(ephemeral.publicKey.export({ format: "jwk" }).x ?? "", "base64url");
      // OpenSSL refuses a low-order peer (an all-zero shared secret), as age does.
      let secret: Buffer;
      try {
        secret = diffieHellman({ privateKey: ephemeral.privateKey, publicKey: key });
      } catch (cause) {
        throw new BootsealError("BAD_INPUT", `age: invalid recipient: ${recipient}`, { cause });
      }
      const wrapKey = Buffer.from(hkdfSync("sha256", secret, Buffer.concat([share, bytes]), LABEL, 32));
      const cipher = createCipheriv("chacha20-poly1305", wrapKey, ZERO_NONCE, { authTagLength: 16 });
      const body = Buffer.concat([cipher.update(fileKey), cipher.final(), cipher.getAuthTag()]);
      return [new Stanza(["X25519", share.toString("base64").replace(/=+$/, "")], body)];
    },
  };
}
