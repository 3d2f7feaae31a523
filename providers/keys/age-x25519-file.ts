/**
 * age files (age-encryption.org/v1) to and from native X25519 recipients and identities, on
 * node:crypto's X25519, HKDF-SHA256, HMAC-SHA256 and ChaCha20-Poly1305, in the armour sops
 * stores in an `enc` field. Why not the age-encryption package (typage) here: loading it costs
 * a CLI run ~25 ms (its noble curves, hashes and post-quantum code evaluate at import), more than
 * sops's whole decrypt of a small file, and its WebCrypto path costs a publish ~0.3 ms of CPU
 * per wrap (issue #31, #33). These are the two things nearly every age user does: one
 * `AGE-SECRET-KEY-1…` identity, `age1…` recipients. Everything else (scrypt, SSH, plugin and
 * post-quantum stanzas, a header or armour this strict reader does not take) answers
 * `unsupported`, and ./age.ts hands the file to typage, whose verdict then stands. Checked both
 * ways against the real `age` and typage (test/providers/keys/age-x25519-file.test.ts).
 */
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createPrivateKey,
  createPublicKey,
  createSecretKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  type KeyObject,
  randomBytes,
  timingSafeEqual,
} from "node:crypto";
import { BootsealError } from "../../src/errors.ts";
import { SizeBoundedLru } from "../../src/size-bounded-lru.ts";
import { bech32Decode } from "./age-plugin.ts";

const VERSION_LINE = "age-encryption.org/v1";
const X25519_LABEL = Buffer.from("age-encryption.org/v1/X25519");
const ARMOR_BEGIN = "-----BEGIN AGE ENCRYPTED FILE-----";
const ARMOR_END = "-----END AGE ENCRYPTED FILE-----";
/** SubjectPublicKeyInfo and PKCS #8 of an X25519 key, up to its 32 bytes (RFC 8410). */
const SPKI_PREFIX = Buffer.from("302a300506032b656e032100", "hex");
const PKCS8_PREFIX = Buffer.from("302e020100300506032b656e04220420", "hex");
const CHUNK = 64 * 1024;
const TAG = 16;
/** A sops `enc` holds a 32-byte data key: bound the payload and the header anyway. */
const MAX_FILE = 1 << 20;
const MAX_HEADER_LINES = 64;

/** Not handled natively: let typage read it (and give its own verdict). */
export const UNSUPPORTED = Symbol("unsupported");

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64").replace(/=+$/, "");

/** Canonical unpadded base64 (as age writes it), or null. */
function fromB64(text: string): Buffer | null {
  if (!/^[A-Za-z0-9+/]*$/.test(text)) return null;
  const bytes = Buffer.from(text, "base64");
  return b64(bytes) === text ? bytes : null;
}

/** `age1…` with one '1' (Bech32 data has none): not a plugin, tag or post-quantum recipient. */
export function isX25519Recipient(recipient: string): boolean {
  return recipient.startsWith("age1") && recipient.indexOf("1", 4) < 0;
}

/** `AGE-SECRET-KEY-1…`: the native identity (`AGE-SECRET-KEY-PQ-1…` and plugins are not). */
export function isX25519Identity(identity: string): boolean {
  return identity.startsWith("AGE-SECRET-KEY-1");
}

/** The recipient's 32 bytes, or null when it is not a valid X25519 recipient. */
export function x25519RecipientBytes(recipient: string): Buffer | null {
  if (recipient !== recipient.toLowerCase()) return null;
  const decoded = bech32Decode(recipient);
  return decoded && decoded.hrp === "age" && decoded.data.length === 32 ? Buffer.from(decoded.data) : null;
}

interface IdentityKey {
  readonly privateKey: KeyObject;
  /** Its recipient's 32 bytes (the HKDF salt's second half). */
  readonly recipient: Buffer;
}

/** Parsed identities by their text: a run loads its few identities once and unwraps many files. */
const identityKeys = new SizeBoundedLru<string, IdentityKey | null>(1024, () => 1);
const recipientKeys = new SizeBoundedLru<string, { readonly key: KeyObject; readonly bytes: Buffer }>(
  1024,
  () => 1,
);

function remember<V>(cache: SizeBoundedLru<string, V>, key: string, value: V): V {
  cache.set(key, value);
  return value;
}

/** The key object of an X25519 public key's 32 bytes. */
const x25519PublicKey = (bytes: Uint8Array): KeyObject =>
  createPublicKey({ key: Buffer.concat([SPKI_PREFIX, bytes]), format: "der", type: "spki" });

/** The identity's key, or null when it is not a valid `AGE-SECRET-KEY-1…` identity. */
export function x25519IdentityKey(identity: string): IdentityKey | null {
  const cached = identityKeys.get(identity);
  if (cached !== undefined) return cached;
  const decoded = identity === identity.toUpperCase() ? bech32Decode(identity) : null;
  if (decoded?.hrp !== "AGE-SECRET-KEY-" || decoded.data.length !== 32)
    return remember(identityKeys, identity, null);
  const privateKey = createPrivateKey({
    key: Buffer.concat([PKCS8_PREFIX, decoded.data]),
    format: "der",
    type: "pkcs8",
  });
  decoded.data.fill(0);
  const recipient = createPublicKey(privateKey)
    .export({ format: "der", type: "spki" })
    .subarray(SPKI_PREFIX.length);
  return remember(identityKeys, identity, { privateKey, recipient });
}

/** The recipient's key object and its 32 bytes (the HKDF salt's second half). */
function recipientKey(recipient: string): { readonly key: KeyObject; readonly bytes: Buffer } {
  const cached = recipientKeys.get(recipient);
  if (cached) return cached;
  const bytes = x25519RecipientBytes(recipient);
  if (!bytes) throw new BootsealError("BAD_INPUT", `age: invalid recipient: ${recipient}`);
  return remember(recipientKeys, recipient, { key: x25519PublicKey(bytes), bytes });
}

/**
 * Node takes a key object faster than raw bytes (each call on bytes checks for a key object
 * the slow way: 10 against 2-4 µs here), so every key below is made one first.
 */
const keyOf = (bytes: Uint8Array) => createSecretKey(bytes);

function chacha(key: Buffer, nonce: Buffer, data: Uint8Array): Buffer {
  const cipher = createCipheriv("chacha20-poly1305", keyOf(key), nonce, { authTagLength: TAG });
  return Buffer.concat([cipher.update(data), cipher.final(), cipher.getAuthTag()]);
}

/** ChaCha20-Poly1305 open; null when the tag does not verify. */
function unchacha(key: Buffer, nonce: Buffer, sealed: Uint8Array): Buffer | null {
  if (sealed.length < TAG) return null;
  const decipher = createDecipheriv("chacha20-poly1305", keyOf(key), nonce, { authTagLength: TAG });
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - TAG)), decipher.final()]);
  } catch {
    return null;
  }
}

const hkdf = (ikm: Uint8Array, salt: Uint8Array, info: string | Buffer) =>
  Buffer.from(hkdfSync("sha256", keyOf(ikm), salt, info, 32));

/** The STREAM nonce of chunk `n` (11-byte big-endian counter, then the last-chunk flag). */
function streamNonce(n: number, last: boolean): Buffer {
  const nonce = Buffer.alloc(12);
  nonce.writeUIntBE(n, 5, 6);
  nonce[11] = last ? 1 : 0;
  return nonce;
}

function armor(file: Buffer): string {
  const text = file.toString("base64");
  const lines: string[] = [];
  for (let i = 0; i < text.length; i += 64) lines.push(text.slice(i, i + 64));
  return `${ARMOR_BEGIN}\n${lines.join("\n")}\n${ARMOR_END}\n`;
}

/** The armour's bytes, or UNSUPPORTED where this reader is stricter than age's (typage decides). */
function dearmor(text: string): Buffer | typeof UNSUPPORTED {
  const lines = text.trim().replace(/\r\n/g, "\n").split("\n");
  if (lines.length < 3 || lines[0] !== ARMOR_BEGIN || lines.at(-1) !== ARMOR_END) return UNSUPPORTED;
  const body = lines.slice(1, -1);
  if (body.some((l, i) => l.length > 64 || (i < body.length - 1 && l.length !== 64))) return UNSUPPORTED;
  const joined = body.join("");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(joined) || joined.length % 4 !== 0 || joined.length > (MAX_FILE * 4) / 3)
    return UNSUPPORTED;
  const bytes = Buffer.from(joined, "base64");
  return bytes.toString("base64") === joined ? bytes : UNSUPPORTED;
}

/** An armoured age file of `payload` for these X25519 recipients (what sops writes into `enc`). */
export function encryptToX25519(payload: Uint8Array, recipients: readonly string[]): string {
  const fileKey = randomBytes(16);
  try {
    let header = `${VERSION_LINE}\n`;
    for (const recipient of recipients) {
      const peer = recipientKey(recipient);
      const ephemeral = generateKeyPairSync("x25519");
      // The JWK export is the cheaper of Node's two ways to the raw 32 bytes.
      const share = Buffer.from(ephemeral.publicKey.export({ format: "jwk" }).x as string, "base64url");
      let shared: Buffer;
      try {
        // OpenSSL refuses a low-order peer (an all-zero shared secret), as age does.
        shared = diffieHellman({ privateKey: ephemeral.privateKey, publicKey: peer.key });
      } catch (cause) {
        throw new BootsealError("BAD_INPUT", `age: invalid recipient: ${recipient}`, { cause });
      }
      const wrapKey = hkdf(shared, Buffer.concat([share, peer.bytes]), X25519_LABEL);
      shared.fill(0);
      const body = b64(chacha(wrapKey, Buffer.alloc(12), fileKey));
      wrapKey.fill(0);
      header += `-> X25519 ${b64(share)}\n${body}\n`;
    }
    header += "---";
    const macKey = hkdf(fileKey, Buffer.alloc(0), "header");
    const mac = createHmac("sha256", keyOf(macKey)).update(header).digest();
    macKey.fill(0);
    const nonce = randomBytes(16);
    const payloadKey = hkdf(fileKey, nonce, "payload");
    const chunks: Buffer[] = [nonce];
    const count = Math.max(1, Math.ceil(payload.length / CHUNK));
    for (let n = 0; n < count; n++) {
      const part = payload.subarray(n * CHUNK, (n + 1) * CHUNK);
      chunks.push(chacha(payloadKey, streamNonce(n, n === count - 1), part));
    }
    payloadKey.fill(0);
    return armor(Buffer.concat([Buffer.from(`${header} ${b64(mac)}\n`), ...chunks]));
  } finally {
    fileKey.fill(0);
  }
}

interface Stanza {
  readonly args: string[];
  readonly body: Buffer;
}

/** The header's stanzas, the bytes its MAC covers and the MAC, or UNSUPPORTED. */
function parseHeader(
  file: Buffer,
): { stanzas: Stanza[]; covered: Buffer; mac: Buffer; rest: Buffer } | typeof UNSUPPORTED {
  let at = 0;
  const line = (): string | null => {
    const end = file.indexOf(0x0a, at);
    if (end < 0) return null;
    const text = file.subarray(at, end).toString("latin1");
    at = end + 1;
    return text;
  };
  if (line() !== VERSION_LINE) return UNSUPPORTED;
  const stanzas: Stanza[] = [];
  for (let n = 0; n < MAX_HEADER_LINES; n++) {
    const start = at;
    const head = line();
    if (head === null) return UNSUPPORTED;
    if (head.startsWith("--- ")) {
      const mac = fromB64(head.slice(4));
      if (mac?.length !== 32) return UNSUPPORTED;
      return { stanzas, covered: file.subarray(0, start + 3), mac, rest: file.subarray(at) };
    }
    if (!head.startsWith("-> ")) return UNSUPPORTED;
    const args = head.slice(3).split(" ");
    if (args.some((a) => a === "")) return UNSUPPORTED;
    const parts: Buffer[] = [];
    for (;;) {
      const bodyLine = line();
      if (bodyLine === null || bodyLine.length > 64) return UNSUPPORTED;
      const bytes = fromB64(bodyLine);
      if (!bytes) return UNSUPPORTED;
      parts.push(bytes);
      if (bodyLine.length < 64) break;
    }
    stanzas.push({ args, body: Buffer.concat(parts) });
  }
  return UNSUPPORTED;
}

/**
 * The payload of an armoured age file, opened with X25519 identities: the bytes, null when no
 * identity matches its stanza, or UNSUPPORTED (not X25519 stanzas only, or not read strictly
 * here). A file whose key was found but whose MAC or payload does not verify is BAD_INPUT.
 */
export function decryptWithX25519(
  armored: string,
  identities: readonly string[],
): Uint8Array | null | typeof UNSUPPORTED {
  const file = dearmor(armored);
  if (file === UNSUPPORTED) return UNSUPPORTED;
  const header = parseHeader(file);
  if (header === UNSUPPORTED || header.stanzas.length === 0) return UNSUPPORTED;
  const shares: { share: Buffer; body: Buffer }[] = [];
  for (const { args, body } of header.stanzas) {
    const share = args.length === 2 && args[0] === "X25519" ? fromB64(args[1] as string) : null;
    if (share?.length !== 32 || body.length !== 32) return UNSUPPORTED;
    shares.push({ share, body });
  }
  const keys = identities.map(x25519IdentityKey);
  if (keys.some((k) => k === null)) return UNSUPPORTED;
  let fileKey: Buffer | null = null;
  search: for (const key of keys as IdentityKey[]) {
    for (const { share, body } of shares) {
      let shared: Buffer;
      try {
        shared = diffieHellman({ privateKey: key.privateKey, publicKey: x25519PublicKey(share) });
      } catch {
        return UNSUPPORTED; // a low-order share: typage gives age's error
      }
      const wrapKey = hkdf(shared, Buffer.concat([share, key.recipient]), X25519_LABEL);
      shared.fill(0);
      fileKey = unchacha(wrapKey, Buffer.alloc(12), body);
      wrapKey.fill(0);
      if (fileKey) break search;
    }
  }
  if (!fileKey) return null;
  try {
    const macKey = hkdf(fileKey, Buffer.alloc(0), "header");
    const mac = createHmac("sha256", keyOf(macKey)).update(header.covered).digest();
    macKey.fill(0);
    if (!timingSafeEqual(mac, header.mac))
      throw new BootsealError("BAD_INPUT", "age: the header's MAC does not verify");
    if (header.rest.length < 16 + TAG) throw new BootsealError("BAD_INPUT", "age: the payload is truncated");
    const payloadKey = hkdf(fileKey, header.rest.subarray(0, 16), "payload");
    const sealed = header.rest.subarray(16);
    const count = Math.max(1, Math.ceil(sealed.length / (CHUNK + TAG)));
    const out: Buffer[] = [];
    for (let n = 0; n < count; n++) {
      const part = sealed.subarray(n * (CHUNK + TAG), (n + 1) * (CHUNK + TAG));
      const opened = unchacha(payloadKey, streamNonce(n, n === count - 1), part);
      // An empty last chunk is only valid as the whole payload (age's STREAM rule).
      if (!opened || (n > 0 && n === count - 1 && opened.length === 0)) {
        payloadKey.fill(0);
        throw new BootsealError("BAD_INPUT", "age: the payload does not verify");
      }
      out.push(opened);
    }
    payloadKey.fill(0);
    const payload = Buffer.concat(out);
    for (const part of out) part.fill(0);
    return new Uint8Array(payload);
  } finally {
    fileKey.fill(0);
  }
}
