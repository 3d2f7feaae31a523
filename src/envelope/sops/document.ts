/**
 * The in-memory tree every codec produces and consumes (sops calls it TreeBranch).
 * Ordered, duplicates kept, comments as items where they sit. Codecs translate file
 * syntax to and from this tree; walk/encrypt/decrypt/mac know no file syntax.
 */

/** A plain scalar, typed the way sops types it (docs/sops-format.md section 2.2). */
export type Scalar =
  /** Text; the binary codec (and decryption of bytes that are not UTF-8) may hold raw bytes. */
  | { readonly kind: "scalar"; readonly type: "str"; readonly value: string | Uint8Array }
  /** 64-bit signed integer. */
  | { readonly kind: "scalar"; readonly type: "int"; readonly value: bigint }
  /** 64-bit float (±Infinity and NaN allowed: YAML .inf/.nan). */
  | { readonly kind: "scalar"; readonly type: "float"; readonly value: number }
  | { readonly kind: "scalar"; readonly type: "bool"; readonly value: boolean }
  /** A timestamp, held as Go's time.MarshalText form (RFC 3339, nanoseconds, zeros dropped). */
  | { readonly kind: "scalar"; readonly type: "time"; readonly value: string }
  /** Raw bytes (`type:bytes`): never produced by sops, accepted on read. */
  | { readonly kind: "scalar"; readonly type: "bytes"; readonly value: Uint8Array }
  /** Null: skipped by encryption and the MAC. */
  | { readonly kind: "scalar"; readonly type: "null" };

export type ScalarType = Scalar["type"];

/**
 * A comment line. `text` is what sops holds: YAML `# foo` -> " foo", dotenv `#foo` -> "foo",
 * INI stripped of leading `;#` and spaces. `inline` marks a YAML comment that sat at the end
 * of a value's line, so codecs can put it back there.
 */
export interface Comment {
  readonly kind: "comment";
  readonly text: string;
  readonly inline?: boolean;
}

export interface Entry {
  readonly kind: "entry";
  readonly key: string;
  readonly value: Value;
}

export interface Mapping {
  readonly kind: "map";
  readonly items: readonly (Entry | Comment)[];
  /** Codec presentation hint (e.g. YAML flow style); ignored by the core. */
  readonly style?: string;
}

export interface Sequence {
  readonly kind: "seq";
  readonly items: readonly (Value | Comment)[];
  readonly style?: string;
}

export type Value = Scalar | Mapping | Sequence;
export type Node = Value | Comment;

/** One document of a file: YAML may have several, every other format exactly one. */
export type Branch = Mapping;

export const str = (value: string | Uint8Array): Scalar => ({ kind: "scalar", type: "str", value });
export const entry = (key: string, value: Value): Entry => ({ kind: "entry", key, value });
export const mapping = (items: readonly (Entry | Comment)[]): Mapping => ({ kind: "map", items });
export const comment = (text: string): Comment => ({ kind: "comment", text });
