/**
 * Wrapping the data key for key groups, and getting it back (sops-format.md section 9).
 * OWNER: keys work package (with shamir.ts). Signatures below are the agreed contract.
 */
import type { KeyEntry, KeyKind, MasterKey } from "../../../providers/keys/master-key.ts";

/** Turns a metadata entry into a usable key; null when this kind is not available here. */
export type KeyResolver = (entry: KeyEntry) => MasterKey | null;

/** sops's default order within a group: age, then PGP, then the others as loaded. */
export const DEFAULT_DECRYPTION_ORDER: readonly KeyKind[] = [
  "age",
  "pgp",
  "kms",
  "gcp_kms",
  "azure_kv",
  "hc_vault",
];

export interface WrapOptions {
  /** Shamir threshold; 0/undefined -> number of groups. Ignored with one group. */
  readonly threshold?: number;
  readonly now?: Date;
  readonly signal?: AbortSignal;
}

/**
 * One group: every key wraps the whole 32-byte data key. Several: one Shamir share per
 * group (33 bytes: y-bytes then x = group index + 1), every key of group i wraps share i.
 * Resolves to the metadata entries, one list per group, in key order.
 */
export declare function wrapDataKey(
  dataKey: Uint8Array,
  groups: readonly (readonly MasterKey[])[],
  options?: WrapOptions,
): Promise<KeyEntry[][]>;

export interface UnwrapOptions {
  readonly threshold?: number;
  readonly order?: readonly KeyKind[];
  readonly signal?: AbortSignal;
}

/**
 * The 32-byte data key, from the first key per group that unwraps (in `order`), recombining
 * shares when there are several groups. Throws NoKeyAvailableError listing every key's
 * failure when not enough groups could be opened.
 */
export declare function unwrapDataKey(
  groups: readonly (readonly KeyEntry[])[],
  resolve: KeyResolver,
  options?: UnwrapOptions,
): Promise<Uint8Array>;
