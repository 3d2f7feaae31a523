/**
 * One encrypted value: `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]` (docs/sops-format.md section 2.1,
 * sops aes/cipher.go). AES-256-GCM under the document's data key, AAD = the value's path.
 */
import { createCipheriv, createDecipheriv, createSecretKey, type KeyObject, randomBytes } from "node:crypto";
import { BootsealError } from "../../errors.ts";

/** sops writes 32-byte nonces (GCM derives J0 through GHASH for non-96-bit IVs). */
export const IV_LENGTH = 32;
const TAG_LENGTH = 16;
const KEY_LENGTH = 32;

// Same shape as sops's parser: anchored at the start only, greedy fields, anything after the
// closing bracket ignored. `[^\n]` is Go's `.` (JavaScript's `.` also stops at \r, U+2028/9).
const ENCRYPTED_VALUE = /^ENC\[AES256_GCM,data:([^\n]+),iv:([^\n]+),tag:([^\n]+),type:([^\n]+)\]/;

const utf8 = new TextEncoder();

/**
 * The data key: raw bytes, or a KeyObject made from them once per document (dataKeyObject).
 * Node turns raw bytes into a key object on every createCipheriv, which costs more than the
 * AES-GCM of a short value; documents with thousands of values pass the KeyObject.
 */
export type DataKey = Uint8Array | KeyObject;

/**
 * A KeyObject for a 32-byte data key, to pass to encryptValue / decryptValue; a key of any
 * other length is returned as is, so the first use fails exactly as it would have.
 */
export function dataKeyObject(dataKey: Uint8Array): DataKey {
  return dataKey.length === KEY_LENGTH ? createSecretKey(dataKey) : dataKey;
}

export interface DecryptedValue {
  readonly type: string;
  readonly bytes: Uint8Array;
}

/** True when `text` has the shape of a sops encrypted value (does not check the fields). */
export function isEncryptedValue(text: string): boolean {
  return ENCRYPTED_VALUE.test(text);
}

function checkKey(dataKey: DataKey): void {
  // Precondition: AES-256 key. A wrong length is a programming error, not user input.
  const length = dataKey instanceof Uint8Array ? dataKey.length : dataKey.symmetricKeySize;
  if (length !== KEY_LENGTH) throw new BootsealError("INTERNAL", "Data key must be 32 bytes");
}

function toBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/** 1 for the characters of the standard base64 alphabet (A-Z a-z 0-9 + /), by char code. */
const B64_CHAR = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
  B64_CHAR[c.charCodeAt(0)] = 1;

/**
 * Go base64.StdEncoding as sops reads it: standard alphabet, padding required, i.e.
 * /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/ (a loop: the regex was a
 * hot spot on large documents).
 */
function isStdBase64(text: string): boolean {
  const n = text.length;
  if (n % 4 !== 0) return false;
  let end = n;
  if (n > 0 && text.charCodeAt(n - 1) === 61 /* = */) {
    end = text.charCodeAt(n - 2) === 61 ? n - 2 : n - 1;
  }
  for (let i = 0; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c >= 128 || B64_CHAR[c] === 0) return false;
  }
  return true;
}

/** Decoded bytes; internal use only (may share Buffer's pool, never handed out). */
function fromBase64(text: string): Buffer {
  if (!isStdBase64(text)) throw new BootsealError("BAD_INPUT", "Encrypted value is not valid base64");
  return Buffer.from(text, "base64");
}

/**
 * The AAD bytes of the last path seen: consecutive values often share a path (list items),
 * and encoding it again for each was measurable on large documents.
 */
let lastAad = ":";
let lastAadBytes: Uint8Array = utf8.encode(lastAad);

function aadBytes(aad: string): Uint8Array {
  if (aad !== lastAad) {
    lastAadBytes = utf8.encode(aad);
    lastAad = aad;
  }
  return lastAadBytes;
}

/** IVs are cut from a larger random block: one randomBytes call per value was a hot spot. */
const IV_POOL_SIZE = IV_LENGTH * 256;
let ivPool: Buffer = Buffer.alloc(0);
let ivPoolAt = 0;

function freshIv(): Uint8Array {
  if (ivPoolAt + IV_LENGTH > ivPool.length) {
    // A new block each time (never refilled in place): IVs handed out earlier stay as they are.
    ivPool = randomBytes(IV_POOL_SIZE);
    ivPoolAt = 0;
  }
  const iv = ivPool.subarray(ivPoolAt, ivPoolAt + IV_LENGTH);
  ivPoolAt += IV_LENGTH;
  return iv;
}

/**
 * Encrypt non-empty plaintext bytes (empty values are left unencrypted by the caller).
 * `iv` is for known-answer tests and IV reuse of identical (plaintext, path) pairs only.
 */
export function encryptValue(
  plaintext: Uint8Array,
  type: string,
  dataKey: DataKey,
  aad: string,
  iv: Uint8Array = freshIv(),
): string {
  checkKey(dataKey);
  if (iv.length === 0) throw new BootsealError("INTERNAL", "IV must not be empty");
  const cipher = createCipheriv("aes-256-gcm", dataKey, iv, { authTagLength: TAG_LENGTH });
  cipher.setAAD(aadBytes(aad));
  const data = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  const tag = cipher.getAuthTag();
  return `ENC[AES256_GCM,data:${toBase64(data)},iv:${toBase64(iv)},tag:${toBase64(tag)},type:${type}]`;
}

/** sops's words for a GCM tag that does not verify (its aes cipher's), which scripts match. */
const GCM_FAILED = "Could not decrypt with AES_GCM: cipher: message authentication failed";

/**
 * Parse and decrypt one value. BAD_INPUT when it does not parse; MAC_MISMATCH when the GCM
 * tag does not verify (wrong key, wrong path, or tampering), never with any plaintext.
 */
export function decryptValue(text: string, dataKey: DataKey, aad: string): DecryptedValue {
  checkKey(dataKey);
  const m = ENCRYPTED_VALUE.exec(text);
  if (!m) throw new BootsealError("BAD_INPUT", "Value does not match sops' data format");
  const data = fromBase64(m[1]!);
  const iv = fromBase64(m[2]!);
  const tag = fromBase64(m[3]!);
  const type = m[4]!;
  // sops appends the tag to the data, so only a full 16-byte tag can verify; Node would
  // otherwise accept a truncated one.
  if (tag.length !== TAG_LENGTH) throw new BootsealError("MAC_MISMATCH", GCM_FAILED);
  if (iv.length === 0) throw new BootsealError("BAD_INPUT", "Encrypted value has an empty IV");
  const decipher = createDecipheriv("aes-256-gcm", dataKey, iv, { authTagLength: TAG_LENGTH });
  decipher.setAAD(aadBytes(aad));
  decipher.setAuthTag(tag);
  const head = decipher.update(data);
  try {
    const tail = decipher.final();
    const bytes = new Uint8Array(head.length + tail.length);
    bytes.set(head, 0);
    bytes.set(tail, head.length);
    return { type, bytes };
  } catch (err) {
    throw new BootsealError("MAC_MISMATCH", GCM_FAILED, { cause: err });
  } finally {
    // The unauthenticated (or copied) plaintext must not linger.
    head.fill(0);
  }
}
