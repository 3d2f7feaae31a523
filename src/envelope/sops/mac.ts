/**
 * The document MAC (docs/sops-format.md section 5; sops.go Encrypt/Decrypt, cmd/sops/common DecryptTree):
 * uppercase hex SHA-512 over the canonical plaintext of every leaf in walk order, stored
 * encrypted as a `str` value whose AAD is `lastmodified` re-formatted at second precision.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { BootsealError, describeError } from "../../errors.ts";
import { formatRfc3339Seconds, parseRfc3339 } from "./canonical.ts";
import { type DataKey, decryptValue, encryptValue } from "./value-cipher.ts";

/**
 * sops's MACOnlyEncryptedInitialization: SHA-256("sops"), fed first when only encrypted
 * leaves are hashed, so such a MAC never equals one over all leaves.
 */
export const MAC_ONLY_ENCRYPTED_PREFIX: Uint8Array = new Uint8Array(
  createHash("sha256").update("sops").digest(),
);

const utf8 = new TextEncoder();

export interface MacHasher {
  /** One leaf's canonical plaintext (comments and nulls are never passed here). */
  add(bytes: Uint8Array, encrypted: boolean): void;
  /** Uppercase hex SHA-512, 128 characters. */
  digestHex(): string;
}

export function createMacHasher(macOnlyEncrypted: boolean): MacHasher {
  const hash = createHash("sha512");
  if (macOnlyEncrypted) hash.update(MAC_ONLY_ENCRYPTED_PREFIX);
  return {
    add(bytes, encrypted) {
      if (!macOnlyEncrypted || encrypted) hash.update(bytes);
    },
    digestHex() {
      return hash.digest("hex").toUpperCase();
    },
  };
}

/** The AAD of the MAC: `lastmodified` parsed as RFC 3339 and re-formatted like Go's time.RFC3339. */
export function macAad(lastModified: string): string {
  const t = parseRfc3339(lastModified);
  if (t === null) throw new BootsealError("BAD_INPUT", "Invalid lastmodified timestamp");
  return formatRfc3339Seconds(t);
}

/** The `mac` metadata value for a computed MAC. */
export function encryptMac(macHex: string, dataKey: DataKey, lastModified: string): string {
  return encryptValue(utf8.encode(macHex), "str", dataKey, macAad(lastModified));
}

/**
 * Decrypt the stored MAC and compare it in constant time with the recomputed one.
 * NO_MAC when the document has none; MAC_MISMATCH when it does not decrypt (wrong key,
 * altered lastmodified or mac) or differs.
 */
export function verifyMac(
  computedHex: string,
  storedMac: string,
  dataKey: DataKey,
  lastModified: string,
): void {
  if (storedMac === "") throw new BootsealError("NO_MAC", "File has no MAC");
  const aad = macAad(lastModified);
  let stored: { type: string; bytes: Uint8Array };
  try {
    stored = decryptValue(storedMac, dataKey, aad);
  } catch (err) {
    // sops's words, which scripts match.
    throw new BootsealError("MAC_MISMATCH", `Cannot decrypt MAC: ${describeError(err).message}`, {
      cause: err,
    });
  }
  const expected = utf8.encode(computedHex);
  const ok =
    stored.type === "str" &&
    stored.bytes.length === expected.length &&
    timingSafeEqual(stored.bytes, expected);
  stored.bytes.fill(0);
  if (!ok) throw new BootsealError("MAC_MISMATCH", "MAC mismatch");
}
