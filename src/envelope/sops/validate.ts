/**
 * Structural checks of an encrypted document, without any key: is it what it claims to be?
 * Pure (bytes were parsed by a codec; no I/O). Used where a document arrives already
 * encrypted (the service's SOPS upload path) and where its format must be decided from the
 * content (the fetcher), so a plaintext or half-encrypted document is never stored or served
 * as if it were sealed.
 *
 * - validateStructure: every value and comment the document's own selection rule says is
 *   encrypted is a well-formed `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]` (standard base64,
 *   a 32-byte IV, a 16-byte tag, a known type), or empty/null as sops leaves them; a document
 *   with non-empty values has at least one encrypted (a rule that encrypts nothing seals
 *   nothing); the metadata is usable: a `mac` that is the ENC[] of a 128-character hex digest,
 *   key groups with at least one entry each and an `enc` per entry of its kind's shape
 *   (KeyKindFormat encSyntax, from the injected table), `key_groups` not shadowed by top-level
 *   key lists, a Shamir threshold no larger than the number of groups, weakly typed fields of
 *   the type sops writes. (lastmodified, version and the selection rule are checked by
 *   metadataFromTree.)
 * - checkEncryptedComments: the comment half of it, for the machine side.
 * - jsonStoreFormat: json or binary from what the MAC covers (issue #10 L4).
 *
 * Every error is BAD_INPUT and names a place (a key path, a metadata field), never a value.
 */
import { BootsealError } from "../../errors.ts";
import { plaintextBytes } from "./canonical.ts";
import type { Branch, Mapping, Value } from "./document.ts";
import { type KeyEntry, type KeyKinds, kindFormat } from "./master-key.ts";
import { type Metadata, metadataField, RULE_KINDS } from "./metadata.ts";
import { compileRule, transformBranches } from "./walk.ts";

/** The value types sops's cipher knows; `comment` only for comments. */
const VALUE_TYPES = new Set(["str", "int", "float", "bool", "bytes", "time"]);
const COMMENT_TYPES = new Set(["comment", "str"]);
/** sops writes 32-byte IVs and 16-byte GCM tags; its MAC is 128 hex characters (SHA-512). */
const IV_BYTES = 32;
const TAG_BYTES = 16;
const MAC_HEX_CHARS = 128;
/** How much of a key path an error message quotes. */
const MAX_PATH_CHARS = 120;

const WELL_FORMED =
  /^ENC\[AES256_GCM,data:([A-Za-z0-9+/=]+),iv:([A-Za-z0-9+/=]+),tag:([A-Za-z0-9+/=]+),type:([a-z]+)\]$/;

const bad = (message: string): BootsealError => new BootsealError("BAD_INPUT", message);

/** Decoded length of strict standard base64 (padding required), or -1 when it is not. */
function base64Length(text: string): number {
  if (text.length % 4 !== 0) return -1;
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  if (text.slice(0, text.length - padding).includes("=")) return -1;
  const bytes = Buffer.from(text, "base64");
  // Non-canonical trailing bits decode but do not re-encode to the same text.
  if (bytes.toString("base64") !== text) return -1;
  return bytes.length;
}

/** The ENC[] fields of a well-formed value, or a reason (never quoting the value). */
function parseEncrypted(text: string): { type: string; dataBytes: number } | string {
  const m = WELL_FORMED.exec(text);
  if (!m) return "is not an ENC[AES256_GCM,data:…,iv:…,tag:…,type:…] value";
  const data = base64Length(m[1]!);
  if (data <= 0) return "has data that is not non-empty standard base64";
  if (base64Length(m[2]!) !== IV_BYTES) return `has an iv that is not ${IV_BYTES} bytes of standard base64`;
  if (base64Length(m[3]!) !== TAG_BYTES) return `has a tag that is not ${TAG_BYTES} bytes of standard base64`;
  return { type: m[4]!, dataBytes: data };
}

/** A key path for a message: JSON-quoted keys, cut short. Keys are names, never values. */
function describePath(path: readonly string[]): string {
  if (path.length === 0) return "the top level";
  const text = path.map((k) => JSON.stringify(k)).join(".");
  return text.length > MAX_PATH_CHARS ? `${text.slice(0, MAX_PATH_CHARS)}…` : text;
}

function where(path: readonly string[], branch: number, branches: number): string {
  return branches > 1 ? `${describePath(path)} (document ${branch + 1})` : describePath(path);
}

/** Every value (when `values`) and comment the rule selects must be encrypted (or empty, as sops leaves it). */
function checkValues(branches: readonly Branch[], metadata: Metadata, values: boolean): void {
  const selector = compileRule(metadata.rule);
  let sealed = 0;
  let plain = 0;
  branches.forEach((branch, i) => {
    transformBranches([branch], selector, {
      scalar(value, visit) {
        if (!values) return value;
        if (!visit.encrypted) {
          const bytes = plaintextBytes(value);
          if (bytes !== null && bytes.length > 0) plain++;
          return value;
        }
        const at = where(visit.path, i, branches.length);
        if (value.type !== "str" || typeof value.value !== "string") {
          throw bad(`the value at ${at} must be encrypted but is a plain ${value.type}`);
        }
        if (value.value === "") return value;
        const parsed = parseEncrypted(value.value);
        if (typeof parsed === "string") throw bad(`the value at ${at} must be encrypted but ${parsed}`);
        // A list's encrypted comment is an item of type comment (walk.ts Visit.inSequence).
        const known = VALUE_TYPES.has(parsed.type) || (visit.inSequence && parsed.type === "comment");
        if (!known) throw bad(`the value at ${at} has an unknown type`);
        sealed++;
        return value;
      },
      comment(value, visit) {
        if (!visit.encrypted || value.text === "") return value;
        const at = `a comment at ${where(visit.path, i, branches.length)}`;
        const parsed = parseEncrypted(value.text);
        if (typeof parsed === "string") throw bad(`${at} must be encrypted but ${parsed}`);
        if (!COMMENT_TYPES.has(parsed.type)) throw bad(`${at} has an unknown type`);
        return value;
      },
    });
  });
  // A rule that leaves every value in plaintext (`unencrypted_regex: .*`) seals nothing.
  if (values && plain > 0 && sealed === 0) {
    throw bad("the document's selection rule leaves every value unencrypted: nothing in it is sealed");
  }
}

/**
 * Only the comments of validateStructure: comments are outside the MAC and decryption keeps
 * one that does not decrypt verbatim (sops, for files older than 3.0), so without this check
 * anyone who can write the stored document can add a plaintext comment to the decrypted
 * output (a `#!` first line changes what cloud-init does with it). For the machine side,
 * before decrypting.
 */
export function checkEncryptedComments(branches: readonly Branch[], metadata: Metadata): void {
  checkValues(branches, metadata, false);
}

const isNull = (v: Value | undefined): boolean =>
  v === undefined || (v.kind === "scalar" && v.type === "null");

function checkMac(tree: Mapping, metadata: Metadata): void {
  const raw = metadataField(tree, "mac");
  if (isNull(raw) || metadata.mac === "") throw bad("the document has no MAC (metadata field mac)");
  if (raw?.kind !== "scalar" || raw.type !== "str") throw bad("metadata field mac is not a string");
  const parsed = parseEncrypted(metadata.mac);
  if (typeof parsed === "string") throw bad(`metadata field mac ${parsed}`);
  if (parsed.type !== "str" || parsed.dataBytes !== MAC_HEX_CHARS) {
    throw bad("metadata field mac is not an encrypted SHA-512 digest (type str, 128 bytes)");
  }
}

const isScalar = (v: Value, type: string): boolean => v.kind === "scalar" && v.type === type;
const isText = (v: Value, pattern: RegExp): boolean =>
  v.kind === "scalar" && v.type === "str" && typeof v.value === "string" && pattern.test(v.value);

/**
 * Fields sops reads with weak typing, held to the type sops writes: `mac_only_encrypted: -1`
 * or `key_groups: "x"` beside top-level keys would otherwise pass unnoticed.
 */
function checkTypes(tree: Mapping): void {
  const typed: [string, (v: Value) => boolean, string][] = [
    ["key_groups", (v) => v.kind === "seq", "a list"],
    // The flat formats (dotenv, INI) hold every metadata value as a string.
    ["shamir_threshold", (v) => isScalar(v, "int") || isText(v, /^\d{1,9}$/), "an integer"],
    ["mac_only_encrypted", (v) => isScalar(v, "bool") || isText(v, /^(?:true|false)$/), "a boolean"],
    ...RULE_KINDS.map((name): [string, (v: Value) => boolean, string] => [
      name,
      (v) => v.kind === "scalar" && v.type === "str",
      "a string",
    ]),
  ];
  for (const [name, ok, what] of typed) {
    const v = metadataField(tree, name);
    if (v !== undefined && !isNull(v) && !ok(v)) throw bad(`metadata field ${name} is not ${what}`);
  }
}

function checkGroups(tree: Mapping, metadata: Metadata, kinds: KeyKinds): void {
  checkTypes(tree);
  const groups = metadata.keyGroups;
  const listed = (v: Value | undefined): boolean =>
    v !== undefined && (v.kind === "map" || (v.kind === "seq" && v.items.some((x) => x.kind !== "comment")));
  // Top-level key lists win over key_groups in sops: a document with both hides one of them.
  if (listed(metadataField(tree, "key_groups")) && kinds.some((k) => listed(metadataField(tree, k.kind)))) {
    throw bad("metadata has both top-level key lists and key_groups");
  }
  groups.forEach((group, g) => {
    if (group.length === 0) throw bad(`key group ${g + 1} has no keys`);
    group.forEach((e, i) => {
      // Numbered within its kind, as the entry sits in the `<kind>` list of the file.
      const n = group.slice(0, i).filter((x) => x.kind === e.kind).length;
      if (e.enc === "") throw bad(`key group ${g + 1}: ${e.kind} entry ${n + 1} has no enc`);
      const syntax = kindFormat(kinds, e.kind)?.encSyntax;
      if (syntax !== undefined && !syntax.test(e.enc)) {
        throw bad(
          `key group ${g + 1}: ${e.kind} entry ${n + 1} has an enc that is not a ${e.kind} ciphertext`,
        );
      }
    });
  });
  const t = metadata.shamirThreshold;
  if (t !== undefined && t > groups.length) {
    throw bad(`metadata field shamir_threshold is larger than the number of key groups (${groups.length})`);
  }
}

/**
 * BAD_INPUT unless the document is structurally what it claims to be (see the file comment).
 * `tree` is the raw `sops` mapping the metadata was read from; `kinds` the key registry's table.
 */
export function validateStructure(
  branches: readonly Branch[],
  tree: Mapping,
  metadata: Metadata,
  kinds: KeyKinds,
): void {
  checkMac(tree, metadata);
  checkGroups(tree, metadata, kinds);
  checkValues(branches, metadata, true);
}

/**
 * BAD_INPUT unless every key group of the document has an entry `accepted` (e.g. a master key
 * of the creation rule): a group of foreign keys only would hold a share nobody on the rule can open.
 */
export function checkGroupsNamed(metadata: Metadata, accepted: (entry: KeyEntry) => boolean): void {
  metadata.keyGroups.forEach((group, g) => {
    if (!group.some((e) => e.enc !== "" && accepted(e))) {
      throw bad(
        metadata.keyGroups.length > 1
          ? `key group ${g + 1} names none of the master keys of the creation rule`
          : "the document names none of the master keys of the creation rule for this machine",
      );
    }
  });
}

/** Top-level keys of the (first) branch whose subtree feeds at least one byte into the MAC. */
function macCoveredTopKeys(branch: Branch, metadata: Metadata): Set<string> {
  const covered = new Set<string>();
  transformBranches([branch], compileRule(metadata.rule), {
    scalar(value, visit) {
      const key = visit.path[0];
      if (key === undefined || covered.has(key)) return value;
      if (visit.encrypted) {
        // An ENC[] value decrypts to non-empty bytes or fails; a plain one fails decryption.
        // A list item of type comment decrypts to a comment, outside the MAC.
        const text = value.type === "str" && typeof value.value === "string" ? value.value : undefined;
        const listComment = visit.inSequence && text?.endsWith(",type:comment]") === true;
        if (text !== "" && !listComment) covered.add(key);
      } else if (!metadata.macOnlyEncrypted) {
        const bytes = plaintextBytes(value);
        if (bytes !== null && bytes.length > 0) covered.add(key);
      }
      return value;
    },
    comment: (c) => c,
  });
  return covered;
}

/**
 * JSON or binary for a `{…}` SOPS document, from authenticated information only. sops itself
 * goes by the file name; where there is none, the format must not follow keys the MAC does
 * not cover (empty and null leaves, empty objects and arrays, and with mac_only_encrypted
 * every unencrypted leaf): else adding `"x": ""` to a binary document turns its payload into
 * a JSON wrapper.
 *
 * binary: `data` is a string and the only top-level key. json: something other than `data`
 * is covered by the MAC, or there is no string `data`. Otherwise (the MAC covers `data` alone
 * but other top-level keys sit beside it) the document is refused: its format cannot be
 * decided from what is authenticated.
 */
export function jsonStoreFormat(branches: readonly Branch[], metadata: Metadata): "json" | "binary" {
  const branch = branches[0];
  if (branch === undefined || branches.length !== 1) return "json";
  const entries = branch.items.filter((i) => i.kind === "entry");
  // Every `data` entry counts: a duplicate `"data": []` in front of the string must not decide.
  const stringData = entries.some(
    (e) => e.key === "data" && e.value.kind === "scalar" && e.value.type === "str",
  );
  if (!stringData) return "json";
  for (const key of macCoveredTopKeys(branch, metadata)) if (key !== "data") return "json";
  if (entries.length === 1) return "binary";
  throw bad(
    "the MAC covers only the top-level key data but other top-level keys sit beside it: binary or JSON cannot be decided",
  );
}
