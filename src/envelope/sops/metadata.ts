/**
 * Typed SOPS metadata and its wire shape (the `sops` mapping).
 * OWNER: sops-core work package. Types below are the agreed contract; keep them stable.
 */
import type { KeyEntry } from "../../../providers/keys/master-key.ts";

/** Exactly one of the six selection rules (sops-format.md section 4). */
export type SelectionRule =
  | { readonly kind: "unencrypted_suffix"; readonly value: string }
  | { readonly kind: "encrypted_suffix"; readonly value: string }
  | { readonly kind: "unencrypted_regex"; readonly value: string }
  | { readonly kind: "encrypted_regex"; readonly value: string }
  | { readonly kind: "unencrypted_comment_regex"; readonly value: string }
  | { readonly kind: "encrypted_comment_regex"; readonly value: string };

export const DEFAULT_RULE: SelectionRule = { kind: "unencrypted_suffix", value: "_unencrypted" };

export interface Metadata {
  /** One or more key groups; a single group is written at the top level of `sops`. */
  readonly keyGroups: readonly (readonly KeyEntry[])[];
  /** Present when the file has it (or groups > 1). */
  readonly shamirThreshold?: number;
  /** As found in the file (or written: `YYYY-MM-DDTHH:MM:SSZ`). */
  readonly lastModified: string;
  /** `ENC[...]` of the MAC, or "" when absent. */
  readonly mac: string;
  /** null: none recorded (binary store since 3.11); readers then assume the default rule. */
  readonly rule: SelectionRule | null;
  readonly macOnlyEncrypted: boolean;
  readonly version: string;
}
