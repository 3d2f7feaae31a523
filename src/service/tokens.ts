/**
 * Bootstrap tokens. Format: `bst.<namespace>.<name>.<secret>`, the secret 32 random bytes in
 * base64url (43 characters). Namespace and name are DNS-1123 labels and cannot contain a dot,
 * so the token splits unambiguously; naming the machine reveals nothing secret and lets a
 * token presented for another machine be refused (403) without a store lookup or an index.
 *
 * The service keeps only SHA-256(token) in `tokens/<ns>/<name>.json`, with its expiry and the
 * fetches left; the token itself is shown once, in the publish (or userdata) response.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { BootsealError } from "../errors.ts";
import { formatMachineId, isDnsLabel, type MachineId } from "../machine/machine-id.ts";
import type { TokenMirror } from "./status-record.ts";

const PREFIX = "bst";
const SECRET_BYTES = 32;

export interface TokenRecord {
  readonly machine: string;
  /** SHA-256 of the whole token string, lower-case hex. */
  readonly sha256: string;
  readonly issuedAt: string;
  readonly expiresAt: string;
  /** Configuration fetches still allowed. */
  readonly usesLeft: number;
  /**
   * One-time fetch `after-first-fetch`: the fetch that claimed the config (its ETag, when).
   * Set by one compare-and-swap before the body is sent, so only one fetch can ever set it.
   */
  readonly firstFetch?: { readonly etag: string; readonly at: string };
  /**
   * The published config this token fetches (its ETag as the status record names it): a
   * fetch finding any other version refuses the token, so a token never reaches a later
   * publish, whatever uses it has left. Absent in records written before the binding existed.
   */
  readonly configEtag?: string;
  /**
   * A derived token (deriveToken): the publish's random salt, base64url. Not secret by itself:
   * the token is an HMAC under the service's derivation key. Absent: a random token.
   */
  readonly salt?: string;
  /** The publish version a derived token belongs to. */
  readonly version?: number;
  /** The bootstrap command the stub carries (`--exec`), stored with the published version. */
  readonly command?: string;
}

/**
 * The hashing and comparing a token check does, injectable so a test can count that every
 * failing path does the same work as a passing one (L5: timing must not say whether a
 * machine has a token record).
 */
export interface TokenWork {
  hash(text: string): string;
  equal(aHex: string, bHex: string): boolean;
}

export const DEFAULT_TOKEN_WORK: TokenWork = {
  hash: (text) => sha256Hex(text),
  equal: (a, b) => digestsEqual(a, b),
};

/**
 * Compared against when a machine has no token record, so that path hashes and compares
 * exactly as a present record does. Its digest is of no token (64 hex zeros never equal a
 * SHA-256 output in practice, and digestsEqual is constant-time either way).
 */
export const DUMMY_TOKEN_RECORD: TokenRecord = {
  machine: "",
  sha256: "0".repeat(64),
  issuedAt: "1970-01-01T00:00:00.000Z",
  expiresAt: "1970-01-01T00:00:00.000Z",
  usesLeft: 0,
};

export function sha256Hex(text: string | Uint8Array): string {
  return createHash("sha256").update(text).digest("hex");
}

export function mintToken(
  machine: MachineId,
  ttlMs: number,
  uses: number,
  now: Date,
): { token: string; record: TokenRecord } {
  const secret = randomBytes(SECRET_BYTES).toString("base64url");
  const token = `${PREFIX}.${machine.namespace}.${machine.name}.${secret}`;
  return { token, record: recordOf(token, machine, ttlMs, uses, now) };
}

/** The stored record of a token: its hash, never the token. */
function recordOf(token: string, machine: MachineId, ttlMs: number, uses: number, now: Date): TokenRecord {
  return {
    machine: formatMachineId(machine),
    sha256: sha256Hex(token),
    issuedAt: now.toISOString(),
    expiresAt: new Date(now.getTime() + ttlMs).toISOString(),
    usesLeft: uses,
  };
}

/** Domain separation of the derivation: this HMAC key derives nothing else. */
const DERIVATION_LABEL = "bootseal-bootstrap-token";
const SALT_BYTES = 16;

export function newSalt(): string {
  return randomBytes(SALT_BYTES).toString("base64url");
}

/**
 * The token of one publish, derived instead of drawn: secret = base64url(HMAC-SHA256(key,
 * "bootseal-bootstrap-token\0" + ns/name + "\0" + version + "\0" + salt)). The same inputs
 * give the same token, so a user-data stub for a published version can be rendered again
 * (byte-identical) without storing the token; the per-publish salt makes a republish of the
 * same version number (after a delete) a different token. NUL cannot occur in any field.
 */
export function deriveToken(key: Uint8Array, machine: MachineId, version: number, salt: string): string {
  const message = [DERIVATION_LABEL, formatMachineId(machine), String(version), salt].join("\0");
  const secret = createHmac("sha256", key).update(message, "utf8").digest("base64url");
  return `${PREFIX}.${machine.namespace}.${machine.name}.${secret}`;
}

/** A derived token and its record (the salt and version kept in it). */
export function mintDerivedToken(
  key: Uint8Array,
  machine: MachineId,
  version: number,
  salt: string,
  ttlMs: number,
  uses: number,
  now: Date,
): { token: string; record: TokenRecord } {
  const token = deriveToken(key, machine, version, salt);
  return { token, record: { ...recordOf(token, machine, ttlMs, uses, now), salt, version } };
}

/** True when the text has the shape of a bootstrap token (it may still be wrong). */
export function looksLikeBootstrapToken(text: string): boolean {
  return text.startsWith(`${PREFIX}.`);
}

/** The machine a token names, or null when it is not a well-formed bootstrap token. */
export function parseBootstrapToken(text: string): MachineId | null {
  const parts = text.split(".");
  if (parts.length !== 4 || parts[0] !== PREFIX) return null;
  const [, namespace, name, secret] = parts as [string, string, string, string];
  if (!isDnsLabel(namespace) || !isDnsLabel(name)) return null;
  if (!/^[A-Za-z0-9_-]{43}$/.test(secret)) return null;
  return { namespace, name };
}

/** Constant-time comparison of two hex digests of equal length. */
export function digestsEqual(aHex: string, bHex: string): boolean {
  const a = Buffer.from(aHex, "hex");
  const b = Buffer.from(bHex, "hex");
  return a.length === b.length && a.length > 0 && timingSafeEqual(a, b);
}

export function decodeTokenRecord(text: string): TokenRecord {
  try {
    const r = JSON.parse(text) as TokenRecord;
    if (
      typeof r.sha256 === "string" &&
      typeof r.expiresAt === "string" &&
      typeof r.usesLeft === "number" &&
      typeof r.machine === "string"
    ) {
      return r;
    }
  } catch {
    // fall through
  }
  throw new BootsealError("INTERNAL", "a stored token record is malformed");
}

/**
 * A token presented by a machine, checked against its record: hash, then expiry. Without a
 * record the token is hashed and compared against a dummy one all the same, so a missing
 * record and a wrong token do the same work (timing says nothing about which machines exist).
 */
export function checkToken(
  record: TokenRecord | null,
  token: string,
  m: MachineId,
  now: Date,
  work: TokenWork = DEFAULT_TOKEN_WORK,
): TokenRecord {
  const against = record ?? DUMMY_TOKEN_RECORD;
  const hashMatches = work.equal(against.sha256, work.hash(token));
  const machineMatches = against.machine === formatMachineId(m);
  if (!record || !machineMatches || !hashMatches) {
    throw new BootsealError("UNAUTHORIZED", "unknown, revoked or replaced bootstrap token");
  }
  if (Date.parse(record.expiresAt) <= now.getTime()) {
    throw new BootsealError(
      "TOKEN_EXPIRED",
      "the bootstrap token has expired; publish again or mint a new one",
    );
  }
  return record;
}

/**
 * True when the machine's current token (its record, or the status record's mirror of it) is
 * the one with this digest: false once it was deleted (null) or replaced.
 */
export function isCurrentToken<T extends { readonly sha256: string }>(
  current: T | null,
  tokenSha256: string,
): current is T {
  return current !== null && digestsEqual(current.sha256, tokenSha256);
}

/**
 * Refuses a token already checked (checkToken) that is no longer the machine's when a
 * conditional write re-checks it: another publish, mint or delete got there first.
 */
export function requireCurrentToken<T extends { readonly sha256: string }>(
  current: T | null,
  tokenSha256: string,
): asserts current is T {
  if (!isCurrentToken(current, tokenSha256)) {
    throw new BootsealError("UNAUTHORIZED", "the bootstrap token was revoked or replaced");
  }
}

/** The record with one fetch taken off; TOKEN_EXHAUSTED when none is left. */
export function spendUse(record: TokenRecord): TokenRecord {
  if (record.usesLeft <= 0) {
    throw new BootsealError("TOKEN_EXHAUSTED", "the bootstrap token has no fetches left");
  }
  return { ...record, usesLeft: record.usesLeft - 1 };
}

/** The status record's mirror of a token record. */
export function mirrorOf(token: TokenRecord): TokenMirror {
  const mirror: { -readonly [K in keyof TokenMirror]: TokenMirror[K] } = {
    sha256: token.sha256,
    expiresAt: token.expiresAt,
  };
  if (token.salt !== undefined) mirror.salt = token.salt;
  if (token.command !== undefined) mirror.command = token.command;
  return mirror;
}

/** The token record a mirror stands for, for checkToken (uses are not mirrored: status posts spend none). */
export function tokenFromMirror(m: MachineId, mirror: TokenMirror): TokenRecord {
  return {
    machine: formatMachineId(m),
    sha256: mirror.sha256,
    issuedAt: "",
    expiresAt: mirror.expiresAt,
    usesLeft: 0,
  };
}
