/**
 * Decrypting a document (sops.go Tree.Decrypt, cmd/sops/common DecryptTree): decrypt every
 * selected leaf while recomputing the MAC from the parsed-back plaintexts, then verify it.
 * All or nothing: any failure throws, so no partial plaintext ever leaves this module.
 */
import { BootsealError, hasCode } from "../../errors.ts";
import { plaintextBytes, scalarFromPlaintext } from "./canonical.ts";
import type { Branch, Comment, Scalar } from "./document.ts";
import { unwrapDataKey } from "./key-groups.ts";
import { createMacHasher, verifyMac } from "./mac.ts";
import type { KeyResolver } from "./master-key.ts";
import type { Metadata } from "./metadata.ts";
import { type DataKey, dataKeyObject, decryptValue } from "./value-cipher.ts";
import { compileRule, transformBranches, type Visit } from "./walk.ts";

const lossyUtf8 = new TextDecoder();

export interface DecryptBranchesOptions {
  /** sops --ignore-mac: skip the missing/undecryptable/mismatching MAC checks. */
  readonly ignoreMac?: boolean;
}

/**
 * A value whose GCM tag fails is sops's "Error decrypting tree" (DECRYPTION_FAILED, apart
 * from MAC_MISMATCH, the MAC itself); a malformed ENC[] stays BAD_INPUT.
 */
function decryptOrRefuse(text: string, dataKey: DataKey, aad: string): { type: string; bytes: Uint8Array } {
  try {
    return decryptValue(text, dataKey, aad);
  } catch (err) {
    if (!hasCode(err, "MAC_MISMATCH")) throw err;
    throw new BootsealError(
      "DECRYPTION_FAILED",
      `Error decrypting tree: Error walking tree: Could not decrypt value: ${err.message}`,
      { cause: err },
    );
  }
}

function decryptLeaf(value: Scalar, visit: Visit, dataKey: DataKey): Scalar | Comment {
  if (value.type !== "str" || typeof value.value !== "string") {
    throw new BootsealError("BAD_INPUT", "Expected encrypted value as string");
  }
  // sops leaves empty values unencrypted and decrypts "" to "".
  if (value.value === "") return value;
  const { type, bytes } = decryptOrRefuse(value.value, dataKey, visit.aad);
  try {
    if (type === "comment") {
      // A list's encrypted comment is stored as an item (see Visit.inSequence).
      if (!visit.inSequence) throw new BootsealError("BAD_INPUT", "Unexpected comment type for a value");
      const text = lossyUtf8.decode(bytes);
      bytes.fill(0);
      return { kind: "comment", text };
    }
    // The bytes may become the value itself (type bytes, or text that is not UTF-8).
    return scalarFromPlaintext(type, bytes);
  } catch (err) {
    bytes.fill(0);
    throw err;
  }
}

/**
 * A comment that does not decrypt is kept verbatim: files from before sops 3.0 have
 * plaintext comments. Comments are outside the MAC, so such a comment is never authenticated.
 * An ENC[] comment that does not decrypt is refused (stricter than sops, which keeps it).
 */
function decryptComment(value: Comment, visit: Visit, dataKey: DataKey): Comment {
  if (value.text === "") return value;
  let decrypted: { type: string; bytes: Uint8Array };
  try {
    decrypted = decryptValue(value.text, dataKey, visit.aad);
  } catch (err) {
    // A plaintext comment stays; one that is a sops ciphertext and does not verify was
    // altered (sops keeps it too, with a warning; a machine would write the altered text).
    if (value.text.startsWith("ENC[AES256_GCM,")) {
      throw new BootsealError("DECRYPTION_FAILED", "An encrypted comment did not verify", { cause: err });
    }
    return value;
  }
  const { type, bytes } = decrypted;
  if (type !== "comment" && type !== "str") {
    bytes.fill(0);
    throw new BootsealError("BAD_INPUT", "Encrypted comment has a non-text type");
  }
  const text = lossyUtf8.decode(bytes);
  bytes.fill(0);
  // sops's cipher returns a new Comment, so a decrypted comment is no longer inline: `a: 1
  // # c` decrypts to the line `# c` above `a: 1` (a comment left as it was keeps its place).
  return { kind: "comment", text };
}

/** Decrypt the selected leaves and comments and verify the MAC (unless ignoreMac). */
export function decryptBranches(
  branches: readonly Branch[],
  dataKey: Uint8Array,
  metadata: Metadata,
  opts: DecryptBranchesOptions = {},
): Branch[] {
  const key = dataKeyObject(dataKey);
  const selector = compileRule(metadata.rule);
  const hasher = createMacHasher(metadata.macOnlyEncrypted);
  const out = transformBranches(branches, selector, {
    scalar(value, visit) {
      const result = visit.encrypted ? decryptLeaf(value, visit, key) : value;
      // What decrypts to a comment stays outside the MAC, as the comment was when it was
      // encrypted (sops 3.13.3 decides by the result; 3.13.2 hashed it and failed its own MAC).
      if (result.kind === "comment") return result;
      const bytes = plaintextBytes(result);
      if (bytes !== null) hasher.add(bytes, visit.encrypted);
      return result;
    },
    comment(value, visit) {
      return visit.encrypted ? decryptComment(value, visit, key) : value;
    },
  });
  if (opts.ignoreMac !== true) verifyMac(hasher.digestHex(), metadata.mac, key, metadata.lastModified);
  return out;
}

export interface DecryptDocumentOptions {
  readonly resolve: KeyResolver;
  /** Kind names; default the resolver's order. */
  readonly order?: readonly string[];
  readonly ignoreMac?: boolean;
  readonly signal?: AbortSignal;
}

/** Unwrap the data key with the first usable master key(s), then decrypt and verify. */
export async function decryptDocument(
  branches: readonly Branch[],
  metadata: Metadata,
  opts: DecryptDocumentOptions,
): Promise<Branch[]> {
  const dataKey = await unwrapDataKey(metadata.keyGroups, opts.resolve, {
    ...(metadata.shamirThreshold !== undefined ? { threshold: metadata.shamirThreshold } : {}),
    ...(opts.order ? { order: opts.order } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  try {
    return decryptBranches(branches, dataKey, metadata, opts.ignoreMac ? { ignoreMac: true } : {});
  } finally {
    dataKey.fill(0);
  }
}
