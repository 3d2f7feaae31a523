/**
 * What one provider file exports (a MasterKeyType): its sops format description, its
 * `.sops.yaml` and command-line syntax, and the constructors of its MasterKeys. The registry
 * (index.ts) lists them; nothing else names a kind.
 */
import type {
  KeyEntry,
  KeyFieldValue,
  KeyKindFormat,
  MasterKey,
} from "../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../src/errors.ts";

/** What every provider may read; each provider adds its own narrowly typed options. */
export interface BaseDeps {
  /** Environment to read SOPS_* / provider variables from (default: process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Clock, for created_at; injectable for tests. */
  readonly now?: () => Date;
}

/** The kind's key flag, as `sops encrypt --help` describes it. */
export interface KindFlag {
  /** long flag name without dashes, as sops spells it */
  readonly flag: string;
  readonly short?: string;
  readonly env: string;
  readonly help: string;
  /** One valid key in flag form, for help texts and the registry test. */
  readonly example: string;
  /** Position in the single group sops builds from command-line keys (kms first, age last). */
  readonly rank: number;
  /** Its keys take `--encryption-context` and `--aws-profile` (ShorthandContext). */
  readonly takesContext?: boolean;
}

/** How the kind appears in `.sops.yaml`. */
export interface SopsConfigSyntax {
  /** Name of its list inside a `key_groups` group. */
  readonly groupKey: string;
  /** Items of that list: key strings, or mappings of fields. */
  readonly groupItem: "string" | "mapping";
  /** Name of its shorthand field in a creation rule (a comma-separated string or a list). */
  readonly shorthandKey: string;
}

/** What the shorthand `kms` keys take from the command line or the rule (sops applies them there). */
export interface ShorthandContext {
  readonly kmsContext: Readonly<Record<string, string>> | null;
  readonly awsProfile: string;
}

export const NO_SHORTHAND_CONTEXT: ShorthandContext = { kmsContext: null, awsProfile: "" };

/** A `key_groups` item: a string, or a mapping whose values are strings or string maps. */
export type ConfigItem = string | ReadonlyMap<string, KeyFieldValue>;

export interface MasterKeyType<K extends string = string, D extends BaseDeps = BaseDeps> {
  readonly kind: K;
  readonly format: KeyKindFormat;
  readonly flag: KindFlag;
  readonly config: SopsConfigSyntax;
  /**
   * One key in shorthand form (a `.sops.yaml` shorthand item, one comma-separated part of a
   * flag) as a metadata entry with `enc: ""` and no created_at, the way sops's constructor
   * builds it. null: sops skips the item. BAD_INPUT when it cannot be parsed.
   */
  entryFromText(text: string, context: ShorthandContext): KeyEntry | null;
  /** The entries one `key_groups` item names. */
  entriesFromConfig(item: ConfigItem): KeyEntry[];
  /** Rebuild a key from a document's entry; validates fields, throws BAD_INPUT if malformed. */
  fromMetadata(entry: KeyEntry, deps: D): MasterKey;
  /** Keys from user input such as `--age a,b` or SOPS_AGE_RECIPIENTS (comma-separated). */
  fromUserInput(text: string, deps: D): MasterKey[];
}

/** An entry with `enc: ""` (a key named by configuration, not yet wrapped to). */
export function newEntry(kind: string, fields: [string, KeyFieldValue][]): KeyEntry {
  return { kind, enc: "", fields: new Map(fields) };
}

/** A mapping item's string field ("" when absent); a string map where a string belongs is BAD_INPUT. */
export function itemString(item: ConfigItem, name: string, what: string): string {
  if (typeof item === "string") throw new BootsealError("BAD_INPUT", `${what} must be a mapping`);
  const value = item.get(name);
  if (value === undefined) return "";
  if (typeof value !== "string") throw new BootsealError("BAD_INPUT", `${name} must be a string`);
  return value;
}

/** A string item (age, pgp, hc_vault lists); a mapping there is BAD_INPUT. */
export function itemText(item: ConfigItem, what: string): string {
  if (typeof item !== "string") throw new BootsealError("BAD_INPUT", `${what} must be a string`);
  return item;
}
