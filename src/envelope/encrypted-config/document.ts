/**
 * The EncryptedConfig document (docs/envelope-format.md): its JSON layout, strict parsing,
 * and the canonical header serialization that GCM authenticates as additional data.
 * No keys and no crypto here: this file only turns bytes into checked fields and back.
 */
import { BootsealError } from "../../errors.ts";

export const API_VERSION = "bootseal.dev/v1alpha1";
export const KIND = "EncryptedConfig";
export const CIPHER_ALGORITHM = "aes-256-gcm";
export const DIGEST_ALGORITHM = "sha-512";
export const KEY_DERIVATION_ALGORITHM = "pbkdf2";

export const DEFAULT_ITERATIONS = 50_000;
/** Floor of docs/envelope-format.md: fewer iterations are refused on both encrypt and decrypt. */
export const MIN_ITERATIONS = 10_000;
/** A document is untrusted input: without a cap one field could pin a CPU for hours. */
export const MAX_ITERATIONS = 10_000_000;

export const SALT_BYTES = 32;
export const IV_BYTES = 12;
export const TAG_BYTES = 16;

/** First line of the additional data: names the serialization, so a v2 cannot collide. */
const AAD_DOMAIN = "bootseal EncryptedConfig v1";

/** The document's fields, in the order they are written. */
export interface EncryptedConfigDocument {
  readonly apiVersion: string;
  readonly kind: string;
  readonly provider: string;
  readonly passphraseURI: string;
  readonly keyDerivationAlgorithm: string;
  readonly digestAlgorithm: string;
  readonly iterations: number;
  readonly salt: string;
  readonly cipherAlgorithm: string;
  readonly iv: string;
  /** base64(GCM ciphertext || 16-byte tag). */
  readonly ciphertext: string;
}

const FIELD_ORDER = [
  "apiVersion",
  "kind",
  "provider",
  "passphraseURI",
  "keyDerivationAlgorithm",
  "digestAlgorithm",
  "iterations",
  "salt",
  "cipherAlgorithm",
  "iv",
  "ciphertext",
] as const satisfies readonly (keyof EncryptedConfigDocument)[];

const PROVIDER_RE = /^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$/;
const DNS_LABEL_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** Characters a passphraseURI may hold (see passphrase-uri.ts); keeps the AAD line-safe. */
const URI_RE = /^[A-Za-z0-9\-._~:/%@]+$/;

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", message);
}

/** Standard base64 with padding; anything that does not re-encode identically is refused. */
export function decodeBase64Strict(text: string, field: string): Uint8Array {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) {
    throw bad(`${field} is not valid base64`);
  }
  const bytes = Buffer.from(text, "base64");
  if (bytes.toString("base64") !== text) throw bad(`${field} is not canonical base64`);
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

export function checkIterations(value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value)) {
    throw bad("iterations must be an integer");
  }
  if (value < MIN_ITERATIONS) throw bad(`iterations must be at least ${MIN_ITERATIONS}`);
  if (value > MAX_ITERATIONS) throw bad(`iterations must be at most ${MAX_ITERATIONS}`);
  return value;
}

export function checkProvider(value: unknown): string {
  if (typeof value !== "string" || !PROVIDER_RE.test(value)) {
    throw bad("provider must be a short lowercase name");
  }
  return value;
}

/** `<namespace>/<name>`, both DNS-1123 labels, as object keys are (docs/api.md). */
export function checkMachineId(value: string): string {
  const parts = value.split("/");
  if (parts.length !== 2 || !parts.every((p) => DNS_LABEL_RE.test(p))) {
    throw bad("machine id must be <namespace>/<name> (DNS-1123 labels)");
  }
  return value;
}

/**
 * The additional data: one `name=value` line per header field, in FIELD_ORDER without
 * `ciphertext`, then `machineId=` (empty when none), each line ending in "\n", UTF-8.
 * Every value is checked to hold no line break, so the lines cannot be re-split.
 */
export function headerAad(doc: Omit<EncryptedConfigDocument, "ciphertext">, machineId?: string): Uint8Array {
  const lines = [AAD_DOMAIN];
  for (const name of FIELD_ORDER) {
    if (name === "ciphertext") continue;
    lines.push(`${name}=${String(doc[name])}`);
  }
  lines.push(`machineId=${machineId ?? ""}`);
  const text = `${lines.join("\n")}\n`;
  if (/[\r\n]/.test(lines.join(""))) throw bad("header field holds a line break");
  return new TextEncoder().encode(text);
}

/** JSON, fields in FIELD_ORDER, two-space indent, one final newline. */
export function serializeDocument(doc: EncryptedConfigDocument): string {
  const ordered: Record<string, string | number> = {};
  for (const name of FIELD_ORDER) ordered[name] = doc[name];
  return `${JSON.stringify(ordered, null, 2)}\n`;
}

function requireString(obj: Record<string, unknown>, name: string): string {
  const value = obj[name];
  if (value === undefined) throw bad(`missing field ${name}`);
  if (typeof value !== "string") throw bad(`${name} must be a string`);
  return value;
}

function requireExact(obj: Record<string, unknown>, name: string, expected: string): string {
  const value = requireString(obj, name);
  if (value !== expected) throw bad(`unsupported ${name}`);
  return value;
}

/**
 * Strict parse: a JSON object with exactly the known fields, each of the right type,
 * known algorithm names only, iterations within bounds, canonical base64 of the right
 * lengths. The passphraseURI is only checked for its character set here; its grammar is
 * passphrase-uri.ts's job.
 */
export function parseDocument(input: string | Uint8Array): EncryptedConfigDocument {
  let text: string;
  try {
    text = typeof input === "string" ? input : new TextDecoder("utf-8", { fatal: true }).decode(input);
  } catch {
    throw bad("document is not UTF-8");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw bad("document is not JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw bad("document is not a JSON object");
  }
  const obj = value as Record<string, unknown>;
  const known = new Set<string>(FIELD_ORDER);
  for (const name of Object.keys(obj)) {
    // Unknown fields are refused rather than ignored: they would not be authenticated.
    if (!known.has(name)) throw bad("unknown field in document");
  }
  const iterations = obj.iterations;
  if (iterations === undefined) throw bad("missing field iterations");
  const passphraseURI = requireString(obj, "passphraseURI");
  if (!URI_RE.test(passphraseURI)) throw bad("passphraseURI holds invalid characters");
  const salt = requireString(obj, "salt");
  const iv = requireString(obj, "iv");
  const ciphertext = requireString(obj, "ciphertext");
  const doc: EncryptedConfigDocument = {
    apiVersion: requireExact(obj, "apiVersion", API_VERSION),
    kind: requireExact(obj, "kind", KIND),
    provider: checkProvider(requireString(obj, "provider")),
    passphraseURI,
    keyDerivationAlgorithm: requireExact(obj, "keyDerivationAlgorithm", KEY_DERIVATION_ALGORITHM),
    digestAlgorithm: requireExact(obj, "digestAlgorithm", DIGEST_ALGORITHM),
    iterations: checkIterations(iterations),
    salt,
    cipherAlgorithm: requireExact(obj, "cipherAlgorithm", CIPHER_ALGORITHM),
    iv,
    ciphertext,
  };
  if (decodeBase64Strict(salt, "salt").length !== SALT_BYTES) throw bad(`salt must be ${SALT_BYTES} bytes`);
  if (decodeBase64Strict(iv, "iv").length !== IV_BYTES) throw bad(`iv must be ${IV_BYTES} bytes`);
  if (decodeBase64Strict(ciphertext, "ciphertext").length < TAG_BYTES) throw bad("ciphertext is too short");
  return doc;
}
