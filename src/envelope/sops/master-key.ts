/**
 * The MasterKey seam: everything that wraps or unwraps a SOPS data key implements it, and
 * the format-level description of a key kind (KeyKindFormat). The SOPS core knows no kind by
 * name: the table of kinds (KeyKinds) is injected by the caller, from the key registry
 * providers/keys/index.ts. Kinds are plain strings here; the registry narrows them to KeyKind.
 */
import type { CallOptions } from "../../call-options.ts";

/** A metadata field value: a string, or (AWS KMS `context`) a string map. */
export type KeyFieldValue = string | Readonly<Record<string, string>>;

/**
 * One entry of sops.<kind>[] (or key_groups[i].<kind>[]), fields in document order,
 * `enc` included in `fields` where the document has it. Entries read from a document are
 * written back verbatim.
 */
export interface KeyEntry {
  /** The sops metadata list the entry lives in: `age`, `kms`, … */
  readonly kind: string;
  readonly enc: string;
  readonly fields: ReadonlyMap<string, KeyFieldValue>;
}

/** A configured master key: what to wrap to and unwrap with. Holds no data key. */
export interface MasterKey {
  readonly kind: string;
  /**
   * Identity string as sops computes it (sops-format.md section 8, "Key identity strings"):
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

/**
 * Turns a metadata entry into a usable key; null when this kind is not available here.
 * `order` is the default decryption order (kind names) the registry's resolver carries;
 * without it the keys of a group are tried in document order.
 */
export interface KeyResolver {
  (entry: KeyEntry): MasterKey | null;
  readonly order?: readonly string[];
}

/** How `enc` travels in an EncryptedConfig passphraseURI (docs/envelope-format.md). */
export interface PassphraseFormat {
  /** URI scheme: no `_` allowed, so these follow the sops package names (kms, gcpkms, …). */
  readonly scheme: string;
  /** Default `provider` field of the document (the proposal names clouds, not key types). */
  readonly provider: string;
  /**
   * `base64`/`base64url`: enc is that encoding of the key service's raw ciphertext, which
   * the URI carries; `text`: enc is text (armour, `vault:v1:…`), carried as UTF-8 bytes.
   */
  readonly wrapped: "base64" | "base64url" | "text";
}

/** What the SOPS format needs to know about one key kind (sops stores.go and keysource). */
export interface KeyKindFormat {
  readonly kind: string;
  /** The sops-known fields of an entry, `enc` included, in the order sops writes them. */
  readonly fields: readonly string[];
  /** Fields sops omits when empty (`omitempty`); every other field is always written. */
  readonly omitEmpty: readonly string[];
  /** Fields holding a string map rather than a string (kms `context`). */
  readonly mapFields: readonly string[];
  /** sops writes this kind inside a key group even when empty (no `omitempty` tag). */
  readonly alwaysInGroup: boolean;
  /** Position in sops's internalGroupFrom: the order entries of a group are read in. */
  readonly readRank: number;
  /** Position in sops's default decryption order (age, then PGP, then the rest). */
  readonly decryptionRank: number;
  /** sops MasterKey.ToString(): de-duplication, rotate --rm-*, updatekeys diffs, MasterKey.id. */
  identity(entry: KeyEntry): string;
  /**
   * The shape of a well-formed `enc` of this kind, checked without any key (the service's
   * uploads, src/envelope/sops/validate.ts). Absent: any non-empty text. Linear-time patterns without repeated groups (V8 backtracks
   * those on its stack: a long enc would overflow it).
   */
  readonly encSyntax?: RegExp;
  /** Absent: the kind cannot wrap an EncryptedConfig. */
  readonly passphrase?: PassphraseFormat;
}

/** The injected table of kinds; the registry supplies the one for this build. */
export type KeyKinds = readonly KeyKindFormat[];

/** The format of `kind`, or undefined when the table has none. */
export function kindFormat(kinds: KeyKinds, kind: string): KeyKindFormat | undefined {
  return kinds.find((k) => k.kind === kind);
}

/** A string field of an entry ("" when absent or a map): what identity functions read. */
export function entryString(entry: KeyEntry, name: string): string {
  const value = entry.fields.get(name);
  return typeof value === "string" ? value : "";
}
