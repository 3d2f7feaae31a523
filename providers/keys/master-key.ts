/**
 * The MasterKey seam: everything that wraps or unwraps a SOPS data key implements it.
 * The SOPS core (src/envelope/sops) knows kind names but no kind's fields and never
 * imports a provider; providers/keys/index.ts maps kind -> MasterKeyType.
 */

/** The sops metadata list a kind lives in: sops.age[], sops.kms[], … */
export type KeyKind = "age" | "pgp" | "kms" | "gcp_kms" | "azure_kv" | "hc_vault";

export const KEY_KINDS: readonly KeyKind[] = ["age", "pgp", "kms", "gcp_kms", "azure_kv", "hc_vault"];

/** A metadata field value: a string, or (AWS KMS `context`) a string map. */
export type KeyFieldValue = string | Readonly<Record<string, string>>;

/**
 * One entry of sops.<kind>[] (or key_groups[i].<kind>[]), fields in document order,
 * `enc` included in `fields` where the document has it. Entries read from a document are
 * written back verbatim.
 */
export interface KeyEntry {
  readonly kind: KeyKind;
  readonly enc: string;
  readonly fields: ReadonlyMap<string, KeyFieldValue>;
}

export interface CallOptions {
  readonly signal?: AbortSignal;
}

/** A configured master key: what to wrap to and unwrap with. Holds no data key. */
export interface MasterKey {
  readonly kind: KeyKind;
  /**
   * Identity string as sops computes it (docs/sops-format.md section 8, "Key identity strings"):
   * used for logs, errors, de-duplication, rotate --rm-*, updatekeys diffs. Never secret.
   */
  readonly id: string;
  /** Wrap the 32-byte data key, or a 33-byte Shamir share. Resolves to `enc`. */
  wrap(secret: Uint8Array, options?: CallOptions): Promise<string>;
  /**
   * Resolves to null when there is no credential for this key here (try the next one).
   * Throws a BootsealError when the entry is ours but invalid or the key service failed.
   */
  unwrap(enc: string, options?: CallOptions): Promise<Uint8Array | null>;
  /** Metadata entry for a fresh wrap (`created_at` where the kind has one). */
  toMetadata(enc: string, createdAt: Date): KeyEntry;
}

/** Identities and clients a provider may need; each provider reads only its own part. */
export interface ProviderDeps {
  /** Environment to read SOPS_* / provider variables from (default: process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Clock, for created_at; injectable for tests. */
  readonly now?: () => Date;
  /** Provider-specific extras (client factories, endpoints), keyed by kind. */
  readonly extras?: Readonly<Record<string, unknown>>;
}

/** One per provider file. */
export interface MasterKeyType {
  readonly kind: KeyKind;
  /** Rebuild a key from a document's entry; validates fields, throws BAD_INPUT if malformed. */
  fromMetadata(entry: KeyEntry, deps: ProviderDeps): MasterKey;
  /** Keys from user input such as `--age a,b` or SOPS_AGE_RECIPIENTS (comma-separated). */
  fromUserInput(text: string, deps: ProviderDeps): MasterKey[];
}
