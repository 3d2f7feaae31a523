/**
 * One encrypted value: `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]` (sops-format.md 2.1,
 * sops aes/cipher.go). AES-256-GCM under the document's data key, AAD = the value's path.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { BootsealError } from "../../errors.ts";

/** sops writes 32-byte nonces (GCM derives J0 through GHASH for non-96-bit IVs). */
export const IV_LENGTH = 32;
const TAG_LENGTH = 16;
const KEY_LENGTH = 32;

// Same shape as sops's parser: anchored at the start only, greedy fields, anything after the
// closing bracket ignored. `[^\n]` is Go's `.` (JavaScript's `.` also stops at \r, U+2028/9).
const ENCRYPTED_VALUE = /^ENC\[AES256_GCM,data:([^\n]+),iv:([^\n]+),tag:([^\n]+),type:([^\n]+)\]/;

// Go base64.StdEncoding: standard alphabet, padding required.
const STD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

const utf8 = new TextEncoder();

export interface DecryptedValue {
  readonly type: string;
  readonly bytes: Uint8Array;
}

/** True when `text` has the shape of a sops encrypted value (does not check the fields). */
export function isEncryptedValue(text: string): boolean {
  return ENCRYPTED_VALUE.test(text);
}

function checkKey(dataKey: Uint8Array): void {
  // Precondition: AES-256 key. A wrong length is a programming error, not user input.
  if (dataKey.length !== KEY_LENGTH) throw new BootsealError("INTERNAL", "Data key must be 32 bytes");
}

function toBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

function fromBase64(text: string): Uint8Array {
  if (!STD_BASE64.test(text)) throw new BootsealError("BAD_INPUT", "Encrypted value is not valid base64");
  return new Uint8Array(Buffer.from(text, "base64"));
}

/**
 * Encrypt non-empty plaintext bytes (empty values are left unencrypted by the caller).
 * `iv` is for known-answer tests and IV reuse of identical (plaintext, path) pairs only.
 */
export function encryptValue(
  plaintext: Uint8Array,
  type: string,
  dataKey: Uint8Array,
  aad: string,
  iv: Uint8Array = randomBytes(IV_LENGTH),
): string {
  checkKey(dataKey);
  if (iv.length === 0) throw new BootsealError("INTERNAL", "IV must not be empty");
  const cipher = createCipheriv("aes-256-gcm", dataKey, iv, { authTagLength: TAG_LENGTH });
  cipher.setAAD(utf8.encode(aad));
  const data = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  const tag = cipher.getAuthTag();
  return `ENC[AES256_GCM,data:${toBase64(data)},iv:${toBase64(iv)},tag:${toBase64(tag)},type:${type}]`;
}

/**
 * Parse and decrypt one value. BAD_INPUT when it does not parse; MAC_MISMATCH when the GCM
 * tag does not verify (wrong key, wrong path, or tampering), never with any plaintext.
 */
export function decryptValue(text: string, dataKey: Uint8Array, aad: string): DecryptedValue {
  checkKey(dataKey);
  const m = ENCRYPTED_VALUE.exec(text);
  if (!m) throw new BootsealError("BAD_INPUT", "Value does not match sops' data format");
  const data = fromBase64(m[1]!);
  const iv = fromBase64(m[2]!);
  const tag = fromBase64(m[3]!);
  const type = m[4]!;
  // sops appends the tag to the data, so only a full 16-byte tag can verify; Node would
  // otherwise accept a truncated one.
  if (tag.length !== TAG_LENGTH) throw new BootsealError("MAC_MISMATCH", "Value failed authentication");
  if (iv.length === 0) throw new BootsealError("BAD_INPUT", "Encrypted value has an empty IV");
  const decipher = createDecipheriv("aes-256-gcm", dataKey, iv, { authTagLength: TAG_LENGTH });
  decipher.setAAD(utf8.encode(aad));
  decipher.setAuthTag(tag);
  const head = decipher.update(data);
  try {
    const tail = decipher.final();
    const bytes = new Uint8Array(head.length + tail.length);
    bytes.set(head, 0);
    bytes.set(tail, head.length);
    return { type, bytes };
  } catch (err) {
    throw new BootsealError("MAC_MISMATCH", "Value failed authentication", { cause: err });
  } finally {
    // The unauthenticated (or copied) plaintext must not linger.
    head.fill(0);
  }
}
