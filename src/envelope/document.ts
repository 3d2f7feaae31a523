/**
 * The document façade: what the CLI, the fetcher and the service need to know about an
 * encrypted document's bytes, in one place. Pure (no I/O): bytes in, tree + typed metadata
 * out, and back; which SOPS format some bytes are; which content type a stored format
 * travels with; whether they are an EncryptedConfig instead.
 *
 * Format detection is one algorithm, strongest evidence first:
 *   1. a format the sender named (the service's x-bootseal-format), when it is a known one;
 *   2. the content type: `+yaml` is YAML, `+json` is JSON (or binary, see 4);
 *   3. the file name, by sops' suffix rule (formatFromPath);
 *   4. the content: JSON when the first byte (after whitespace and a BOM) is `{`, YAML
 *      otherwise. A JSON document whose only keys are `data` and `sops` is the `binary`
 *      store, as sops writes binary files.
 * Stored documents (store objects, service answers) only ever are yaml, json or binary.
 */
import type { Codec, EmitOptions, Format } from "./sops/codecs/codec.ts";
import { FORMATS } from "./sops/codecs/codec.ts";
import { codecFor, formatFromPath } from "./sops/codecs/index.ts";
import type { Branch } from "./sops/document.ts";
import type { KeyKinds } from "./sops/master-key.ts";
import { type Metadata, metadataFromTree, metadataToTree } from "./sops/metadata.ts";
import {
  checkEncryptedComments,
  checkGroupsNamed,
  jsonStoreFormat,
  validateStructure,
} from "./sops/validate.ts";

export { checkEncryptedComments, checkGroupsNamed, jsonStoreFormat, validateStructure };

export const SOPS_JSON = "application/sops+json";
export const SOPS_YAML = "application/sops+yaml";

/** The formats a document is stored and served in. */
export type StoredFormat = "yaml" | "json" | "binary";

export interface LoadedDocument {
  readonly codec: Codec;
  readonly branches: Branch[];
  readonly metadata: Metadata;
}

/**
 * An encrypted document's branches and typed metadata (the MAC is checked on decrypt, not here).
 * `kinds` is the key registry's table (providers/keys/index.ts KEY_KINDS): the envelope knows no
 * kind's fields of its own.
 */
export function loadEncrypted(bytes: Uint8Array, format: Format, kinds: KeyKinds): LoadedDocument {
  const codec = codecFor(format);
  const { branches, metadata } = codec.parseEncrypted(bytes);
  return { codec, branches, metadata: metadataFromTree(metadata, kinds) };
}

/**
 * loadEncrypted plus the structural checks of src/envelope/sops/validate.ts: every value the
 * document's selection rule encrypts is a well-formed ENC[], the metadata is usable, and a
 * `{…}` document's json-or-binary shape is decided by what the MAC covers. BAD_INPUT naming
 * the place otherwise. For documents that arrive already encrypted (the service's uploads).
 */
export function loadValidated(bytes: Uint8Array, format: Format, kinds: KeyKinds): LoadedDocument {
  const codec = codecFor(format);
  const { branches, metadata: tree } = codec.parseEncrypted(bytes);
  const metadata = metadataFromTree(tree, kinds);
  validateStructure(branches, tree, metadata, kinds);
  if (format === "json" || format === "binary") jsonStoreFormat(branches, metadata);
  return { codec, branches, metadata };
}

/**
 * A `{…}` document whose format was not named by the operator: loaded as JSON, then json or
 * binary by jsonStoreFormat (what the MAC covers), never by keys an attacker may add.
 */
export function loadJsonOrBinary(bytes: Uint8Array, kinds: KeyKinds): LoadedDocument {
  const doc = loadEncrypted(bytes, "json", kinds);
  const format = jsonStoreFormat(doc.branches, doc.metadata);
  return format === "json" ? doc : { ...doc, codec: codecFor("binary") };
}

/** The encrypted document's bytes, exactly as sops writes this format. */
export function emitEncrypted(
  format: Format,
  branches: readonly Branch[],
  metadata: Metadata,
  kinds: KeyKinds,
  options: EmitOptions = {},
): Uint8Array {
  return codecFor(format).emitEncrypted(branches, metadataToTree(metadata, kinds), options);
}

/** A format name from outside (a flag, a header); USAGE-free: callers word their own errors. */
export function isFormat(text: string | undefined): text is Format {
  return text !== undefined && (FORMATS as readonly string[]).includes(text);
}

export function contentTypeOf(format: StoredFormat): string {
  return format === "yaml" ? SOPS_YAML : SOPS_JSON;
}

/** "application/sops+json; charset=utf-8" -> "application/sops+json". */
export function mediaTypeOf(contentType: string | undefined): string {
  return (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

const WHITESPACE_OR_BOM = new Set([0x20, 0x09, 0x0a, 0x0d, 0xef, 0xbb, 0xbf]);

function startsWithBrace(bytes: Uint8Array): boolean {
  for (const b of bytes) {
    if (!WHITESPACE_OR_BOM.has(b)) return b === 0x7b;
  }
  return false;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The index after the string whose opening quote is at `at` (the end of `bytes` if it has
 * none). A Buffer: its indexOf is memchr, a Uint8Array's a loop (22 KB: 0.2 against 5 µs).
 */
function endOfString(bytes: Buffer, at: number): number {
  for (let from = at + 1; ; ) {
    const quote = bytes.indexOf(QUOTE, from);
    if (quote < 0) return bytes.length;
    let slashes = 0;
    while (bytes[quote - 1 - slashes] === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

/** A top-level key as the format cares: `data`, `sops`, another, or one with an escape in it. */
function keyOf(bytes: Uint8Array, from: number, to: number): "data" | "sops" | "other" | "escaped" {
  if (bytes.subarray(from, to).includes(BACKSLASH)) return "escaped";
  if (to - from !== 4) return "other";
  const key = String.fromCharCode(bytes[from]!, bytes[from + 1]!, bytes[from + 2]!, bytes[from + 3]!);
  return key === "data" || key === "sops" ? key : "other";
}

/** By a whole parse: the keys are exactly `data` and `sops`. Unparseable JSON is "json". */
function parsedJsonOrBinary(bytes: Uint8Array): "json" | "binary" {
  let parsed: unknown;
  try {
    // TextDecoder drops a leading BOM, which JSON.parse would refuse.
    parsed = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return "json";
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return "json";
  const keys = Object.keys(parsed).sort();
  return keys.length === 2 && keys[0] === "data" && keys[1] === "sops" ? "binary" : "json";
}

/**
 * JSON or binary: binary when the object's top-level keys are exactly `data` and `sops`. Found
 * by a scan of the structure (strings skipped, brackets counted), not a parse: every fetch
 * labels its stored document this way, and a binary one is mostly one long string. On valid
 * JSON the scan is exact. On broken JSON its answer does not matter: the binary codec reads
 * through the JSON codec, so either one reports what is wrong (with a line number) when the
 * document is loaded. A key with an escape in it, or an object with no end, is parsed whole.
 */
function jsonOrBinary(document: Uint8Array): "json" | "binary" {
  const bytes = Buffer.from(document.buffer, document.byteOffset, document.byteLength);
  let depth = 0;
  let keyNext = true;
  let data = false;
  let sops = false;
  for (let i = bytes.indexOf(0x7b /* { */) + 1; i < bytes.length; ) {
    const b = bytes[i];
    if (b === QUOTE) {
      const end = endOfString(bytes, i);
      if (keyNext) {
        const key = keyOf(bytes, i + 1, end - 1);
        if (key === "other") return "json";
        if (key === "escaped") return parsedJsonOrBinary(bytes);
        if (key === "data") data = true;
        else sops = true;
        keyNext = false;
      }
      i = end;
      continue;
    }
    if (b === 0x7b || b === 0x5b /* { [ */) depth++;
    else if (b === 0x7d || b === 0x5d /* } ] */) {
      if (depth === 0) return data && sops ? "binary" : "json";
      depth--;
    } else if (b === 0x2c /* , */ && depth === 0) keyNext = true;
    i++;
  }
  return parsedJsonOrBinary(bytes);
}

/** Step 4 alone: the format of stored bytes that came with no trustworthy label. */
export function sniffFormat(bytes: Uint8Array): StoredFormat {
  return startsWithBrace(bytes) ? jsonOrBinary(bytes) : "yaml";
}

export interface FormatHints {
  /** A format the sender named; ignored unless it is a known format. */
  readonly format?: string;
  readonly contentType?: string;
  readonly fileName?: string;
}

/** The document's format by the algorithm above. */
export function detectFormat(bytes: Uint8Array, hints: FormatHints = {}): Format {
  if (isFormat(hints.format)) return hints.format;
  const media = mediaTypeOf(hints.contentType);
  if (media.endsWith("+yaml")) return "yaml";
  if (media.endsWith("+json")) return jsonOrBinary(bytes);
  if (hints.fileName !== undefined && hints.fileName !== "") return formatFromPath(hints.fileName);
  return sniffFormat(bytes);
}

/** An EncryptedConfig is a JSON object whose kind says so; a SOPS document never does. */
export function isEncryptedConfig(bytes: Uint8Array): boolean {
  const head = new TextDecoder().decode(bytes.subarray(0, 4096));
  return /^\s*\{/.test(head) && /"kind"\s*:\s*"EncryptedConfig"/.test(head);
}
