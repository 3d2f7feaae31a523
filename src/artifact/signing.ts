/**
 * Signed artifacts (the single executable the user-data stubs download): SHA-256 and an
 * Ed25519 signature over the file's bytes, keys in PEM (PKCS#8 private, SPKI public), Node
 * crypto only. The signature file holds the raw 64 signature bytes, so a stub can check it
 * with OpenSSL alone before any bootseal code runs:
 *
 *   sha256sum -c bootseal.sha256
 *   openssl pkeyutl -verify -pubin -inkey bootseal.pub.pem -rawin -in bootseal -sigfile bootseal.sig
 *
 * verify also accepts the signature in base64 (one line), for stubs that embed it.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
  verify,
} from "node:crypto";
import { BootsealError } from "../errors.ts";
import { readFileBounded } from "../files/read-bounded.ts";

export const SIGNATURE_BYTES = 64;

/** Ed25519 signs the whole message at once; 1 GiB is far above a 130 MiB executable. */
export const MAX_ARTIFACT_BYTES = 1024 * 1024 * 1024;

/** The artifact's bytes; it is not a document, so its cap is its own (not MAX_DOCUMENT_BYTES). */
export function readArtifact(path: string): Promise<Uint8Array> {
  return readFileBounded(path, { maxBytes: MAX_ARTIFACT_BYTES });
}

export function sha256Hex(data: Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

export function loadPrivateKey(pem: string | Uint8Array, where: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: Buffer.from(pem), format: "pem" });
  } catch (err) {
    throw new BootsealError("BAD_INPUT", `${where} is not a PEM private key`, { cause: err });
  }
  if (key.asymmetricKeyType !== "ed25519")
    throw new BootsealError("BAD_INPUT", `${where} is not an Ed25519 key`);
  return key;
}

export function loadPublicKey(pem: string | Uint8Array, where: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPublicKey({ key: Buffer.from(pem), format: "pem" });
  } catch (err) {
    throw new BootsealError("BAD_INPUT", `${where} is not a PEM public key`, { cause: err });
  }
  if (key.asymmetricKeyType !== "ed25519")
    throw new BootsealError("BAD_INPUT", `${where} is not an Ed25519 key`);
  return key;
}

export function generateSigningKey(): { privatePem: string; publicPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  return {
    privatePem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
  };
}

export function signArtifact(data: Uint8Array, key: KeyObject): Uint8Array {
  return new Uint8Array(sign(null, data, key));
}

/** The raw signature from a .sig file: 64 bytes as they are, or their base64 text. */
export function readSignature(bytes: Uint8Array): Uint8Array {
  if (bytes.length === SIGNATURE_BYTES) return bytes;
  const text = Buffer.from(bytes).toString("utf8").trim();
  if (/^[A-Za-z0-9+/]+={0,2}$/.test(text)) {
    const raw = Buffer.from(text, "base64");
    if (raw.length === SIGNATURE_BYTES) return new Uint8Array(raw);
  }
  throw new BootsealError("BAD_INPUT", "the signature is neither 64 raw bytes nor their base64");
}

/** The hex digest of a `sha256sum` line or a bare digest. */
export function readDigest(text: string): string {
  const m = /^([0-9a-fA-F]{64})(\s|$)/.exec(text.trim());
  if (!m) throw new BootsealError("BAD_INPUT", "the SHA-256 is not 64 hex digits (or a sha256sum line)");
  return (m[1] as string).toLowerCase();
}

/** Throws MAC_MISMATCH when the digest or the signature does not match. */
export function verifyArtifact(
  data: Uint8Array,
  signature: Uint8Array,
  key: KeyObject,
  expectedSha256?: string,
): { sha256: string } {
  const sha256 = sha256Hex(data);
  if (expectedSha256 !== undefined && expectedSha256 !== sha256) {
    throw new BootsealError(
      "MAC_MISMATCH",
      `SHA-256 mismatch: the file is ${sha256}, expected ${expectedSha256}`,
    );
  }
  if (!verify(null, data, key, signature)) {
    throw new BootsealError("MAC_MISMATCH", "the Ed25519 signature does not verify: do not run this file");
  }
  return { sha256 };
}
