/**
 * `--format envelope`: the Cluster API machine bootstrapper proposal's EncryptedConfig.
 * A 32-byte data key is the PBKDF2 passphrase; PBKDF2-HMAC-SHA512 derives the AES-256-GCM
 * key; the header (and the machine id, when given) is GCM additional data. Specified in
 * docs/envelope-format.md. Pure: the only I/O is through MasterKey.
 */
import { createCipheriv, createDecipheriv, pbkdf2, randomBytes } from "node:crypto";
import type { CallOptions } from "../../call-options.ts";
import { BootsealError, NoKeyAvailableError } from "../../errors.ts";
import type { KeyKinds, MasterKey } from "../sops/master-key.ts";
import {
  API_VERSION,
  CIPHER_ALGORITHM,
  checkIterations,
  checkMachineId,
  checkProvider,
  DEFAULT_ITERATIONS,
  DIGEST_ALGORITHM,
  decodeBase64Strict,
  type EncryptedConfigDocument,
  encodeBase64,
  headerAad,
  IV_BYTES,
  KEY_DERIVATION_ALGORITHM,
  KIND,
  parseDocument,
  SALT_BYTES,
  serializeDocument,
  TAG_BYTES,
} from "./document.ts";
import { formatPassphraseUri, parsePassphraseUri, passphraseFormat } from "./passphrase-uri.ts";

export const DATA_KEY_BYTES = 32;

export interface EncryptConfigOptions extends CallOptions {
  readonly key: MasterKey;
  /** The key registry's KEY_KINDS: each kind's passphraseURI scheme and default provider. */
  readonly kinds: KeyKinds;
  /** `<namespace>/<name>`: bound as additional data; decrypt must name the same machine. */
  readonly machineId?: string;
  /** PBKDF2 iterations, default 50,000; 10,000 to 10,000,000. */
  readonly iterations?: number;
  /** The document's `provider` field; defaults from the key kind (aws, gcp, azure, vault, age, pgp). */
  readonly provider?: string;
  /**
   * A data key made elsewhere (KMS GenerateDataKey). Copied, never zeroed in place: the
   * caller owns it. Without `enc`, `key.wrap` still wraps it.
   */
  readonly dataKey?: Uint8Array;
  /** The wrapped form of `dataKey` when the key service already returned one (CiphertextBlob as base64). */
  readonly enc?: string;
  /** Known-answer tests only: fixed salt (32 bytes) and IV (12 bytes). */
  readonly salt?: Uint8Array;
  readonly iv?: Uint8Array;
}

export interface DecryptConfigOptions extends CallOptions {
  /** The master key named by passphraseURI, or null when it is not available here. */
  readonly resolve: (kind: string, keyId: string) => MasterKey | null;
  /** The key registry's KEY_KINDS: which passphraseURI scheme is which kind. */
  readonly kinds: KeyKinds;
  readonly machineId?: string;
}

function deriveKey(dataKey: Uint8Array, salt: Uint8Array, iterations: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // Async so a service thread is not held for the ~50 ms of a 50,000-round derivation.
    pbkdf2(dataKey, salt, iterations, 32, "sha512", (err, key) => (err ? reject(err) : resolve(key)));
  });
}

function fixedBytes(value: Uint8Array | undefined, length: number, name: string): Uint8Array {
  if (value === undefined) return randomBytes(length);
  if (value.length !== length) throw new BootsealError("BAD_INPUT", `${name} must be ${length} bytes`);
  return value;
}

/** Encrypts `plaintext` into an EncryptedConfig JSON document (with a final newline). */
export async function encryptConfig(plaintext: Uint8Array, opts: EncryptConfigOptions): Promise<string> {
  const iterations = checkIterations(opts.iterations ?? DEFAULT_ITERATIONS);
  const provider = checkProvider(opts.provider ?? passphraseFormat(opts.kinds, opts.key.kind).provider);
  const machineId = opts.machineId === undefined ? undefined : checkMachineId(opts.machineId);
  const salt = fixedBytes(opts.salt, SALT_BYTES, "salt");
  const iv = fixedBytes(opts.iv, IV_BYTES, "iv");
  if (opts.enc !== undefined && opts.dataKey === undefined) {
    throw new BootsealError("USAGE", "enc given without its data key");
  }
  if (opts.dataKey !== undefined && opts.dataKey.length !== DATA_KEY_BYTES) {
    throw new BootsealError("BAD_INPUT", `data key must be ${DATA_KEY_BYTES} bytes`);
  }
  // Our own copy, zeroed below whatever happens.
  const dataKey = opts.dataKey === undefined ? randomBytes(DATA_KEY_BYTES) : Buffer.from(opts.dataKey);
  let derived: Buffer | undefined;
  try {
    const signal = opts.signal;
    const enc = opts.enc ?? (await opts.key.wrap(dataKey, signal ? { signal } : undefined));
    const header: Omit<EncryptedConfigDocument, "ciphertext"> = {
      apiVersion: API_VERSION,
      kind: KIND,
      provider,
      passphraseURI: formatPassphraseUri({ kind: opts.key.kind, keyId: opts.key.id, enc }, opts.kinds),
      keyDerivationAlgorithm: KEY_DERIVATION_ALGORITHM,
      digestAlgorithm: DIGEST_ALGORITHM,
      iterations,
      salt: encodeBase64(salt),
      cipherAlgorithm: CIPHER_ALGORITHM,
      iv: encodeBase64(iv),
    };
    derived = await deriveKey(dataKey, salt, iterations);
    const cipher = createCipheriv("aes-256-gcm", derived, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(headerAad(header, machineId));
    const body = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
    return serializeDocument({ ...header, ciphertext: body.toString("base64") });
  } finally {
    dataKey.fill(0);
    derived?.fill(0);
  }
}

/**
 * Decrypts an EncryptedConfig document. Everything is checked before the key service is
 * called; a tag failure (wrong machine id, any altered field) is MAC_MISMATCH and no
 * byte of plaintext is returned.
 */
export async function decryptConfig(
  doc: string | Uint8Array,
  opts: DecryptConfigOptions,
): Promise<Uint8Array> {
  const parsed = parseDocument(doc);
  const machineId = opts.machineId === undefined ? undefined : checkMachineId(opts.machineId);
  const uri = parsePassphraseUri(parsed.passphraseURI, opts.kinds);
  const salt = decodeBase64Strict(parsed.salt, "salt");
  const iv = decodeBase64Strict(parsed.iv, "iv");
  const body = decodeBase64Strict(parsed.ciphertext, "ciphertext");
  const aad = headerAad(parsed, machineId);

  const key = opts.resolve(uri.kind, uri.keyId);
  if (key === null) {
    throw new NoKeyAvailableError("no master key available for this document", [
      { keyId: uri.keyId, reason: "not configured here" },
    ]);
  }
  if (key.kind !== uri.kind) throw new BootsealError("INTERNAL", "resolver returned a key of another kind");
  const signal = opts.signal;
  const dataKey = await key.unwrap(uri.enc, signal ? { signal } : undefined);
  if (dataKey === null) {
    throw new NoKeyAvailableError("no master key could unwrap the data key", [
      { keyId: uri.keyId, reason: "no credential for this key" },
    ]);
  }
  let derived: Buffer | undefined;
  try {
    if (dataKey.length !== DATA_KEY_BYTES) {
      throw new BootsealError("BAD_INPUT", `unwrapped data key is not ${DATA_KEY_BYTES} bytes`);
    }
    derived = await deriveKey(dataKey, salt, parsed.iterations);
    const decipher = createDecipheriv("aes-256-gcm", derived, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(aad);
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    // Node hands out plaintext before the tag is checked: keep it until final() succeeds.
    const plaintext = decipher.update(body.subarray(0, body.length - TAG_BYTES));
    try {
      decipher.final();
    } catch {
      plaintext.fill(0);
      throw new BootsealError("MAC_MISMATCH", "EncryptedConfig authentication tag did not verify");
    }
    return new Uint8Array(plaintext.buffer, plaintext.byteOffset, plaintext.byteLength);
  } finally {
    dataKey.fill(0);
    derived?.fill(0);
  }
}
