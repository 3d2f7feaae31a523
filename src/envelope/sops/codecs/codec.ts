/**
 * A Codec turns one file format (sops calls them "stores") into branches and back.
 * "Store" in bootseal means ObjectStore, hence the name.
 *
 * The metadata travels as a plain Mapping tree: for YAML/JSON/binary it is the value of the
 * top-level `sops` key; the flat formats (dotenv, INI) flatten/unflatten it with
 * ./flatten.ts. src/envelope/sops/metadata.ts turns that tree into typed Metadata and back,
 * and decides the field order, so codecs never know metadata fields.
 *
 * Errors: BootsealError("BAD_INPUT", …) for anything malformed, with a message that names
 * the format and the place (line number where known) but never echoes a secret value.
 */
import type { Branch, Mapping } from "../document.ts";

export type Format = "yaml" | "json" | "dotenv" | "ini" | "binary";

export const FORMATS: readonly Format[] = ["yaml", "json", "dotenv", "ini", "binary"];

export interface EmitOptions {
  /** YAML: spaces per level (sops default 4). JSON: spaces per level, or "\t" (sops default). */
  readonly indent?: number | "\t";
}

export interface Codec {
  readonly format: Format;
  /**
   * The format holds one value that is always encrypted (sops SingleValueStore: binary):
   * encryption ignores selection rules and records none (encryptDocument's singleValue).
   */
  readonly singleValue?: boolean;
  /** A plaintext file. Refuses input that already carries sops metadata (ALREADY_ENCRYPTED). */
  parsePlain(bytes: Uint8Array): Branch[];
  /**
   * An encrypted file: the branches with the `sops` metadata removed, and the metadata tree
   * (YAML: from the first document). NOT_ENCRYPTED when there is no metadata.
   */
  parseEncrypted(bytes: Uint8Array): { branches: Branch[]; metadata: Mapping };
  /** Plaintext output, exactly as `sops decrypt` prints it for this format. */
  emitPlain(branches: readonly Branch[], options?: EmitOptions): Uint8Array;
  /** Encrypted output, exactly as `sops encrypt` writes it for this format. */
  emitEncrypted(branches: readonly Branch[], metadata: Mapping, options?: EmitOptions): Uint8Array;
}
