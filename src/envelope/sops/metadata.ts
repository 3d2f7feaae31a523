/**
 * Typed SOPS metadata and its wire shape (the `sops` mapping).
 * OWNER: sops-core work package. Types below are the agreed contract; keep them stable.
 *
 * metadataFromTree/metadataToTree convert the codecs' plain `sops` mapping to and from these
 * types. Key entries keep the sops-known fields of their kind (canonical names, file order,
 * `enc` included); unknown fields are dropped on read, as sops does. Which kinds exist and
 * what their entries hold comes from the injected KeyKinds table (the key registry's
 * KEY_KINDS). hckms entries are refused (UNSUPPORTED) unless the table has that kind:
 * dropping them would lose recipients. Writing an entry whose kind is not in the table is
 * refused the same way.
 */
import { BootsealError } from "../../errors.ts";
import { formatGoFloat, formatRfc3339Seconds, parseGoBool, parseRfc3339 } from "./canonical.ts";
import type { Entry, Mapping, Scalar, Value } from "./document.ts";
import type { KeyEntry, KeyFieldValue, KeyKindFormat, KeyKinds } from "./master-key.ts";

/** Exactly one of the six selection rules (docs/sops-format.md section 4). */
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
  /**
   * null: none recorded, which only a fresh encryption of a single-value (binary) document
   * gives (sops since 3.11). Reading a document that records none gives DEFAULT_RULE, as
   * sops's ToInternal does, so that rewriting it (rotate, updatekeys) records the default.
   */
  readonly rule: SelectionRule | null;
  readonly macOnlyEncrypted: boolean;
  readonly version: string;
}

// ---------------------------------------------------------------------------------------
// Wire shape <-> Metadata. Reading is as lenient as sops 3.13 (mapstructure with weak
// typing); writing reproduces what sops 3.13.2 writes (alphabetical keys at every level).

/** The six selection rules, in sops's order. */
export const RULE_KINDS: readonly SelectionRule["kind"][] = [
  "unencrypted_suffix",
  "encrypted_suffix",
  "unencrypted_regex",
  "encrypted_regex",
  "unencrypted_comment_regex",
  "encrypted_comment_regex",
];
// blang/semver, as sops's version check parses it (a leading `v` is trimmed first).
const SEMVER =
  /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;

const bad = (message: string): BootsealError => new BootsealError("BAD_INPUT", message);
const lossyUtf8 = new TextDecoder();

/** mapstructure's field lookup: exact name first, then case-insensitive; later duplicates win. */
export function metadataField(m: Mapping, name: string): Value | undefined {
  let exact: Value | undefined;
  let folded: Value | undefined;
  for (const item of m.items) {
    if (item.kind !== "entry") continue;
    if (item.key === name) exact = item.value;
    else if (item.key.toLowerCase() === name) folded = item.value;
  }
  return exact ?? folded;
}

function weakString(v: Value | undefined, name: string): string {
  if (v === undefined) return "";
  if (v.kind !== "scalar") throw bad(`Invalid metadata field ${name}`);
  switch (v.type) {
    case "null":
      return "";
    case "str":
    case "bytes":
      return typeof v.value === "string" ? v.value : lossyUtf8.decode(v.value);
    case "int":
      return v.value.toString();
    case "float":
      return formatGoFloat(v.value);
    case "bool":
      return v.value ? "1" : "0";
    case "time":
      // sops 3.13 cannot read a timestamp here; its text form is what older sops wrote.
      return v.value;
  }
}

function weakInt(v: Value | undefined, name: string): number {
  if (v === undefined || (v.kind === "scalar" && v.type === "null")) return 0;
  if (v.kind === "scalar") {
    if (v.type === "int" && v.value >= -(2n ** 31n) && v.value < 2n ** 31n) return Number(v.value);
    if (v.type === "float" && Number.isInteger(v.value)) return v.value;
    if (v.type === "bool") return v.value ? 1 : 0;
    if (v.type === "str" && typeof v.value === "string") {
      if (v.value === "") return 0;
      // Older flat-format writers stored integers as float text ("2.0").
      if (/^[+-]?\d+(\.0*)?$/.test(v.value)) return Number(v.value);
    }
  }
  throw bad(`Invalid metadata field ${name}`);
}

function weakBool(v: Value | undefined, name: string): boolean {
  if (v === undefined || (v.kind === "scalar" && v.type === "null")) return false;
  if (v.kind === "scalar") {
    if (v.type === "bool") return v.value;
    if (v.type === "int") return v.value !== 0n;
    if (v.type === "float") return v.value !== 0;
    if (v.type === "str" && typeof v.value === "string") {
      if (v.value === "") return false;
      try {
        return parseGoBool(v.value);
      } catch {
        // fall through to the error below
      }
    }
  }
  throw bad(`Invalid metadata field ${name}`);
}

/** A list field: null/absent is empty; a lone mapping counts as a one-item list (weak typing). */
function weakList(v: Value | undefined, name: string): Mapping[] {
  if (v === undefined || (v.kind === "scalar" && v.type === "null")) return [];
  const items = v.kind === "seq" ? v.items : [v];
  const out: Mapping[] = [];
  for (const item of items) {
    if (item.kind === "comment") continue;
    if (item.kind !== "map") throw bad(`Invalid metadata field ${name}`);
    out.push(item);
  }
  return out;
}

function readStringMap(v: Value, name: string): Record<string, string> | undefined {
  if (v.kind === "scalar" && v.type === "null") return undefined;
  if (v.kind !== "map") throw bad(`Invalid metadata field ${name}`);
  const out: Record<string, string> = {};
  for (const item of v.items) {
    if (item.kind === "entry") out[item.key] = weakString(item.value, name);
  }
  return out;
}

function readEntry(format: KeyKindFormat, m: Mapping): KeyEntry {
  const { kind, fields: known } = format;
  const fields = new Map<string, KeyFieldValue>();
  const exact = new Set<string>();
  for (const item of m.items) {
    if (item.kind !== "entry") continue;
    const name = known.includes(item.key) ? item.key : known.find((k) => k === item.key.toLowerCase());
    // Unknown fields are ignored, as by sops; an exact name beats a case-folded one.
    if (name === undefined || (exact.has(name) && name !== item.key)) continue;
    if (name === item.key) exact.add(name);
    if (format.mapFields.includes(name)) {
      const ctx = readStringMap(item.value, name);
      if (ctx === undefined) fields.delete(name);
      else fields.set(name, ctx);
    } else {
      fields.set(name, weakString(item.value, name));
    }
  }
  const createdAt = fields.get("created_at");
  if (known.includes("created_at") && (typeof createdAt !== "string" || parseRfc3339(createdAt) === null)) {
    throw bad(`Invalid created_at in ${kind} key entry`);
  }
  const enc = fields.get("enc");
  return { kind, enc: typeof enc === "string" ? enc : "", fields };
}

function readGroup(m: Mapping, kinds: KeyKinds): KeyEntry[] {
  if (!kinds.some((k) => k.kind === "hckms") && weakList(metadataField(m, "hckms"), "hckms").length > 0) {
    throw new BootsealError("UNSUPPORTED", "HuaweiCloud KMS (hckms) keys are not supported");
  }
  return [...kinds]
    .sort((a, b) => a.readRank - b.readRank)
    .flatMap((format) =>
      weakList(metadataField(m, format.kind), format.kind).map((e) => readEntry(format, e)),
    );
}

/**
 * Typed metadata from the `sops` mapping (sops stores.go ToInternal), with the kinds of
 * `kinds` (the key registry's KEY_KINDS). BAD_INPUT when unusable.
 */
export function metadataFromTree(tree: Mapping, kinds: KeyKinds): Metadata {
  const lastModified = weakString(metadataField(tree, "lastmodified"), "lastmodified");
  if (parseRfc3339(lastModified) === null) throw bad("Invalid lastmodified timestamp");

  // Top-level key lists win over key_groups (sops internalKeygroups).
  const topGroup = readGroup(tree, kinds);
  let keyGroups: KeyEntry[][];
  if (topGroup.length > 0) keyGroups = [topGroup];
  else keyGroups = weakList(metadataField(tree, "key_groups"), "key_groups").map((g) => readGroup(g, kinds));
  if (keyGroups.length === 0) throw bad("No keys found in file");

  const rules: SelectionRule[] = [];
  for (const kind of RULE_KINDS) {
    const value = weakString(metadataField(tree, kind), kind);
    if (value !== "") rules.push({ kind, value });
  }
  if (rules.length > 1) throw bad("Cannot use more than one selection rule in the same file");

  const version = weakString(metadataField(tree, "version"), "version");
  // sops refuses to decrypt when the version does not parse; "1.x" is its legacy exception.
  if (!version.startsWith("1.") && !SEMVER.test(version)) throw bad("Invalid sops version in metadata");

  const threshold = weakInt(metadataField(tree, "shamir_threshold"), "shamir_threshold");
  if (threshold < 0) throw bad("Invalid metadata field shamir_threshold");

  return {
    keyGroups,
    ...(threshold !== 0 ? { shamirThreshold: threshold } : {}),
    lastModified,
    mac: weakString(metadataField(tree, "mac"), "mac"),
    rule: rules[0] ?? DEFAULT_RULE,
    macOnlyEncrypted: weakBool(metadataField(tree, "mac_only_encrypted"), "mac_only_encrypted"),
    version,
  };
}

/** `lastmodified`/`created_at` as sops writes them: Go time.Format(time.RFC3339) of the parsed value. */
function rewriteTimestamp(text: string, name: string): string {
  const t = parseRfc3339(text);
  if (t === null) throw bad(`Invalid ${name} timestamp`);
  return formatRfc3339Seconds(t);
}

/** Go time.Format(time.RFC3339) of `d` in UTC: `YYYY-MM-DDTHH:MM:SSZ`. */
export function formatLastModified(d: Date): string {
  return d.toISOString().replace(/\.\d+Z$/, "Z");
}

const s = (value: string): Scalar => ({ kind: "scalar", type: "str", value });
const entryOf = (key: string, value: Value): Entry => ({ kind: "entry", key, value });
const sorted = (entries: Entry[]): Mapping => ({
  kind: "map",
  // Go's sort.Sort over the key strings: byte order, which for these ASCII names is code-unit order.
  items: [...entries].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)),
});

function lookup(entry: KeyEntry, name: string): KeyFieldValue | undefined {
  const direct = entry.fields.get(name);
  if (direct !== undefined) return direct;
  for (const [k, v] of entry.fields) if (k.toLowerCase() === name) return v;
  return undefined;
}

function writeEntry(entry: KeyEntry, format: KeyKindFormat): Mapping {
  const out: Entry[] = [];
  for (const name of format.fields) {
    const value = name === "enc" ? entry.enc : lookup(entry, name);
    if (typeof value === "object") {
      const ctx = Object.entries(value);
      if (ctx.length === 0) continue;
      out.push(entryOf(name, sorted(ctx.map(([k, v]) => entryOf(k, s(v))))));
      continue;
    }
    const text = value ?? "";
    if (text === "" && format.omitEmpty.includes(name)) continue;
    out.push(entryOf(name, s(name === "created_at" ? rewriteTimestamp(text, name) : text)));
  }
  return sorted(out);
}

function writeKinds(group: readonly KeyEntry[], inGroup: boolean, kinds: KeyKinds): Entry[] {
  const unknown = group.find((e) => !kinds.some((k) => k.kind === e.kind));
  // Dropping it would silently lose a recipient.
  if (unknown) throw new BootsealError("UNSUPPORTED", `${unknown.kind} keys are not supported by this build`);
  const out: Entry[] = [];
  for (const format of kinds) {
    const entries = group.filter((e) => e.kind === format.kind);
    if (entries.length === 0 && !(inGroup && format.alwaysInGroup)) continue;
    out.push(entryOf(format.kind, { kind: "seq", items: entries.map((e) => writeEntry(e, format)) }));
  }
  return out;
}

/**
 * The `sops` mapping exactly as sops 3.13.2 writes it (stores.go metadataFromInternal), with
 * the kinds of `kinds` (the key registry's KEY_KINDS).
 */
export function metadataToTree(md: Metadata, kinds: KeyKinds): Mapping {
  const out: Entry[] = [];
  if (md.keyGroups.length === 1) {
    out.push(...writeKinds(md.keyGroups[0]!, false, kinds));
  } else if (md.keyGroups.length > 1) {
    const groups = md.keyGroups.map((g) => sorted(writeKinds(g, true, kinds)));
    out.push(entryOf("key_groups", { kind: "seq", items: groups }));
  }
  out.push(entryOf("lastmodified", s(rewriteTimestamp(md.lastModified, "lastmodified"))));
  out.push(entryOf("mac", s(md.mac)));
  if (md.macOnlyEncrypted)
    out.push(entryOf("mac_only_encrypted", { kind: "scalar", type: "bool", value: true }));
  if (md.shamirThreshold !== undefined && md.shamirThreshold !== 0) {
    out.push(entryOf("shamir_threshold", { kind: "scalar", type: "int", value: BigInt(md.shamirThreshold) }));
  }
  if (md.rule !== null && md.rule.value !== "") out.push(entryOf(md.rule.kind, s(md.rule.value)));
  out.push(entryOf("version", s(md.version)));
  return sorted(out);
}
