/**
 * Encrypting a document (docs/sops-format.md section 10.1; sops.go Tree.Encrypt): every selected leaf and
 * comment is encrypted and the MAC computed in the same walk, then the data key is wrapped
 * for every master key. Pure orchestration: the only I/O is through MasterKey.
 */
import { randomBytes } from "node:crypto";
import { BootsealError } from "../../errors.ts";
import { plaintextBytes } from "./canonical.ts";
import type { Branch, Comment, Scalar } from "./document.ts";
import { wrapDataKey } from "./key-groups.ts";
import { createMacHasher, encryptMac } from "./mac.ts";
import type { MasterKey } from "./master-key.ts";
import { DEFAULT_RULE, formatLastModified, type Metadata, type SelectionRule } from "./metadata.ts";
import { dataKeyObject, encryptValue } from "./value-cipher.ts";
import { compileRegex, compileRule, transformBranches } from "./walk.ts";

/** The sops version whose behaviour we emulate and record in new documents. */
export const SOPS_VERSION = "3.13.2";
const DATA_KEY_LENGTH = 32;
const utf8 = new TextEncoder();

export interface EncryptBranchesOptions {
  /** null: record no rule (binary store since 3.11); values are then selected by the default. */
  readonly rule: SelectionRule | null;
  readonly macOnlyEncrypted?: boolean;
  /** The `lastmodified` that will be written; the MAC's AAD is derived from it. */
  readonly lastModified: string;
}

/** Encrypt the selected leaves and comments; returns new branches and the encrypted MAC. */
export function encryptBranches(
  branches: readonly Branch[],
  dataKey: Uint8Array,
  opts: EncryptBranchesOptions,
): { branches: Branch[]; mac: string } {
  for (const branch of branches) {
    if (branch.items.some((item) => item.kind === "entry" && item.key === "sops")) {
      throw new BootsealError("ALREADY_ENCRYPTED", "The document already has sops metadata");
    }
  }
  const key = dataKeyObject(dataKey);
  const selector = compileRule(opts.rule);
  // sops refuses to write an encrypted comment that its own unencrypted_comment_regex would
  // match, since decryption would then treat it as plaintext.
  const rule = opts.rule ?? DEFAULT_RULE;
  const plainCommentRe =
    rule.kind === "unencrypted_comment_regex" && rule.value !== "" ? compileRegex(rule.value) : null;
  const hasher = createMacHasher(opts.macOnlyEncrypted === true);

  const out = transformBranches(branches, selector, {
    scalar(value, visit): Scalar {
      const bytes = plaintextBytes(value);
      if (bytes === null) return value;
      hasher.add(bytes, visit.encrypted);
      if (!visit.encrypted) return value;
      // Empty values stay "" (sops isEmpty); byte strings are encrypted as `str`, as sops's
      // walk turns []byte into string before the cipher sees it.
      if (bytes.length === 0) return { kind: "scalar", type: "str", value: "" };
      const type = value.type === "bytes" ? "str" : value.type;
      return { kind: "scalar", type: "str", value: encryptValue(bytes, type, key, visit.aad) };
    },
    comment(value, visit): Comment | Scalar {
      if (!visit.encrypted) return value;
      // In a list, what the cipher returns takes the comment's place as an item (sops
      // walkSlice): `- ENC[…,type:comment]`, or `- ""` for an empty comment (isEmpty).
      if (value.text === "") return visit.inSequence ? { kind: "scalar", type: "str", value: "" } : value;
      const text = encryptValue(utf8.encode(value.text), "comment", key, visit.aad);
      if (plainCommentRe?.test(text)) {
        throw new BootsealError("BAD_INPUT", "An encrypted comment matches unencrypted_comment_regex");
      }
      return visit.inSequence ? { kind: "scalar", type: "str", value: text } : { ...value, text };
    },
  });
  return { branches: out, mac: encryptMac(hasher.digestHex(), key, opts.lastModified) };
}

export interface EncryptDocumentOptions {
  readonly keyGroups: readonly (readonly MasterKey[])[];
  /** Shamir threshold; 0/undefined -> number of groups when there are several. */
  readonly threshold?: number;
  /**
   * The rule given (a flag or the `.sops.yaml` creation rule); undefined or null: none given,
   * so sops's default `unencrypted_suffix: _unencrypted` is used and recorded.
   */
  readonly rule?: SelectionRule | null;
  readonly macOnlyEncrypted?: boolean;
  /**
   * The input is a single-value document (the binary codec, Codec.singleValue): sops ignores
   * every selection rule and mac_only_encrypted for it and records no rule
   * (cmd/sops getEncryptConfig).
   */
  readonly singleValue?: boolean;
  readonly now?: Date;
  readonly signal?: AbortSignal;
  /** Recorded `version`; default SOPS_VERSION. */
  readonly version?: string;
}

/** Encrypt a plaintext document under a fresh data key wrapped by every master key. */
export async function encryptDocument(
  branches: readonly Branch[],
  opts: EncryptDocumentOptions,
): Promise<{ branches: Branch[]; metadata: Metadata }> {
  const now = opts.now ?? new Date();
  const lastModified = formatLastModified(now);
  const single = opts.singleValue === true;
  const rule = single ? null : (opts.rule ?? DEFAULT_RULE);
  const macOnlyEncrypted = !single && opts.macOnlyEncrypted === true;
  const dataKey = new Uint8Array(randomBytes(DATA_KEY_LENGTH));
  try {
    // Values first: a bad rule or an already-encrypted input fails before any key service call.
    const encrypted = encryptBranches(branches, dataKey, { rule, macOnlyEncrypted, lastModified });
    const keyGroups = await wrapDataKey(dataKey, opts.keyGroups, {
      ...(opts.threshold !== undefined ? { threshold: opts.threshold } : {}),
      now,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    const threshold = opts.threshold ? opts.threshold : keyGroups.length > 1 ? keyGroups.length : 0;
    return {
      branches: encrypted.branches,
      metadata: {
        keyGroups,
        ...(threshold !== 0 ? { shamirThreshold: threshold } : {}),
        lastModified,
        mac: encrypted.mac,
        rule,
        macOnlyEncrypted,
        version: opts.version ?? SOPS_VERSION,
      },
    };
  } finally {
    dataKey.fill(0);
  }
}
