/**
 * The tamper fuzz engine, shared by test/hostile/tamper-fuzz.test.ts (bounded, in CI) and
 * bench/tamper-fuzz.ts (a million mutations). It takes real encrypted documents (the sops
 * vectors with their keys, and documents made here for every format and for EncryptedConfig),
 * applies one seeded mutation at a time (a flipped bit or byte, a deleted, inserted or
 * duplicated byte, two values swapped, a key renamed, `lastmodified`, `mac`, an IV, a tag, an
 * `enc`, a metadata field or a readable value changed, an empty key or a comment added, the
 * document truncated; sometimes two or three at once) and decrypts the result the way a
 * machine does: src/fetcher/decrypt-payload.ts's steps in process (loadJsonOrBinary or
 * loadEncrypted, checkEncryptedComments, decryptDocument, emitPlain; decryptConfig for an
 * EncryptedConfig), or decryptPayload itself.
 *
 * The invariant, per mutation:
 *   - a refusal is a BootsealError with a specific code (never INTERNAL, never another
 *     exception), or
 *   - the output is byte for byte the original plaintext ("same"), or
 *   - the output differs only in what the SOPS MAC does not cover by design
 *     (docs/sops-format.md 5.5: names of readable keys, empty and null values, comments, the
 *     shape around readable values; with mac_only_encrypted, readable values): every secret
 *     (each encrypted leaf, with its AAD path) and every MAC-covered readable value is the
 *     original one, in the original order ("outside-mac"). Binary documents and EncryptedConfig
 *     have no such part: for them any difference is a violation.
 * Anything else is a violation: a different secret was released.
 *
 * Deterministic: mutation i of seed s uses its own PRNG seeded from (s, i), so any violation is
 * reproduced alone from its seed and index. Key unwrapping is memoised per (key, enc) for the
 * in-process path (an unchanged enc unwraps to the same key; a mutated one goes to the real
 * provider), so PGP's RSA does not dominate.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { KEY_KINDS, keysFromUserInput, type ProviderDeps, resolverFor } from "../../providers/keys/index.ts";
import {
  checkEncryptedComments,
  emitEncrypted,
  loadEncrypted,
  loadJsonOrBinary,
} from "../../src/envelope/document.ts";
import { decryptConfig, encryptConfig } from "../../src/envelope/encrypted-config/encrypted-config.ts";
import { plaintextBytes } from "../../src/envelope/sops/canonical.ts";
import type { Format } from "../../src/envelope/sops/codecs/codec.ts";
import { codecFor } from "../../src/envelope/sops/codecs/index.ts";
import { decryptDocument } from "../../src/envelope/sops/decrypt.ts";
import type { Branch } from "../../src/envelope/sops/document.ts";
import { encryptDocument } from "../../src/envelope/sops/encrypt.ts";
import type { KeyEntry, KeyResolver, MasterKey } from "../../src/envelope/sops/master-key.ts";
import type { Metadata, SelectionRule } from "../../src/envelope/sops/metadata.ts";
import { compileRule, transformBranches } from "../../src/envelope/sops/walk.ts";
import { BootsealError } from "../../src/errors.ts";
import { decryptPayload } from "../../src/fetcher/decrypt-payload.ts";
import { VECTORS_DIR } from "../helpers/vectors.ts";

export type SubjectFormat = Format | "envelope";

export interface Subject {
  readonly name: string;
  readonly format: SubjectFormat;
  readonly bytes: Uint8Array;
  readonly deps: ProviderDeps;
  /** EncryptedConfig bound to a machine id. */
  readonly machineId?: string;
  /** The plaintext the genuine document decrypts to (null: the genuine one is refused too). */
  original: Uint8Array | null;
  /** What the MAC covers in the original (see authenticatedView). */
  view: string | null;
  metadata: Metadata | null;
}

export const OPERATORS = [
  "flip-bit",
  "flip-byte",
  "delete-byte",
  "insert-byte",
  "duplicate-byte",
  "truncate",
  "swap-values",
  "rename-key",
  "lastmodified",
  "mac",
  "iv",
  "tag",
  "enc-data",
  "enc-type",
  "key-enc",
  "metadata-field",
  "readable-value",
  "add-empty-key",
  "add-comment",
  "stacked",
] as const;
export type Operator = (typeof OPERATORS)[number];

export type OutcomeKind = "same" | "outside-mac" | "refused" | "violation";

export interface Outcome {
  readonly kind: OutcomeKind;
  /** The error code of a refusal. */
  readonly code?: string;
  /** What went wrong (violations only): no plaintext, only classes and names. */
  readonly detail?: string;
}

export interface Violation {
  readonly subject: string;
  readonly operator: string;
  readonly seed: number;
  readonly index: number;
  readonly path: "core" | "payload";
  readonly detail: string;
}

export interface FuzzReport {
  mutations: number;
  /** Mutations that left the bytes unchanged (not decrypted again). */
  unchanged: number;
  readonly outcomes: Record<string, number>;
  readonly byOperator: Record<string, Record<string, number>>;
  readonly violations: Violation[];
}

// ---------------------------------------------------------------- PRNG

/** mulberry32: small, fast, good enough to pick positions. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function mix(seed: number, index: number): number {
  let h = (seed ^ 0x9e3779b9) >>> 0;
  h = Math.imul(h ^ index, 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

type Rng = () => number;
const int = (rng: Rng, n: number): number => Math.floor(rng() * n);
function pick<T>(rng: Rng, items: readonly T[]): T | undefined {
  return items.length === 0 ? undefined : items[int(rng, items.length)];
}

// ---------------------------------------------------------------- mutations

const utf8 = new TextEncoder();
const latin1 = new TextDecoder("latin1");
/** Documents are handled as latin1 text so every byte is one character and back. */
const toText = (b: Uint8Array): string => latin1.decode(b);
const toBytes = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0) & 0xff);

interface Span {
  readonly start: number;
  readonly end: number;
}

function spans(text: string, re: RegExp, group = 0): Span[] {
  const out: Span[] = [];
  for (const m of text.matchAll(re)) {
    const whole = m.index ?? 0;
    const part = m[group] ?? "";
    const offset = group === 0 ? 0 : m[0].indexOf(part);
    if (part.length > 0) out.push({ start: whole + offset, end: whole + offset + part.length });
  }
  return out;
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const INTERESTING = " \t\n\r:#\"'-[]{},=;|>&*!%@`\\0aZ=+/".split("");

function replaceSpan(text: string, span: Span, value: string): string {
  return text.slice(0, span.start) + value + text.slice(span.end);
}

/** Change one character inside a span: another base64 character, or any byte. */
function mutateInside(text: string, span: Span, rng: Rng): string {
  const at = span.start + int(rng, span.end - span.start);
  const old = text[at] ?? "";
  let c: string;
  if (rng() < 0.7 && B64.includes(old)) {
    do c = B64[int(rng, B64.length)] ?? "A";
    while (c === old);
  } else c = rng() < 0.5 ? (pick(rng, INTERESTING) ?? "x") : String.fromCharCode(int(rng, 256));
  return text.slice(0, at) + c + text.slice(at + 1);
}

const ENC_RE = /ENC\[AES256_GCM,data:[^\],]*,iv:[^\],]*,tag:[^\],]*,type:[a-z]*\]/g;
const METADATA_FIELDS = [
  "lastmodified",
  "mac",
  "version",
  "recipient",
  "fp",
  "created_at",
  "enc",
  "unencrypted_suffix",
  "encrypted_suffix",
  "encrypted_regex",
  "unencrypted_regex",
  "mac_only_encrypted",
  "shamir_threshold",
  "key_groups",
  "passphraseURI",
  "iterations",
  "salt",
  "iv",
  "ciphertext",
  "provider",
  "apiVersion",
  "kind",
];

/** The value text after `name` in any format: `name: v`, `"name": "v"`, `name=v`, `sops_name=v`, `name = v`. */
function fieldValueSpans(text: string, name: string): Span[] {
  const re = new RegExp(
    `(?:^|[\\s"{,_])${name}"?\\s*[:=]\\s*("[^"\\n]*"|'[^'\\n]*'|[^\\s,}\\n][^,}\\n]*)`,
    "gm",
  );
  return spans(text, re, 1);
}

/** Readable values: after `key: ` / `key=` / `"key": ` and not an ENC[]. */
function readableValueSpans(text: string): Span[] {
  const re = /(?:^[ \t-]*[^\s:#=;[\]{}"']+|"[^"\n]*")[ \t]*[:=][ \t]*("[^"\n]+"|[^\s"[{E\n][^\n,}]*)/gm;
  return spans(text, re, 1);
}

function keySpans(text: string): Span[] {
  const re = /(?:^[ \t-]*|[{,][ \t\n]*)("?[A-Za-z_][A-Za-z0-9_. -]*"?)[ \t]*[:=]/gm;
  return spans(text, re, 1);
}

function lineStarts(text: string): number[] {
  const out = [0];
  for (let i = text.indexOf("\n"); i !== -1 && i < text.length - 1; i = text.indexOf("\n", i + 1))
    out.push(i + 1);
  return out;
}

function emptyKeyLine(format: SubjectFormat, rng: Rng): string {
  const name = pick(rng, ["x", "data", "zz_unencrypted", "sops", "a b", "\u00e9"]) ?? "x";
  switch (format) {
    case "json":
    case "binary":
    case "envelope":
      return `"${name}": ${pick(rng, ['""', "null", "{}", "[]"])},\n`;
    case "dotenv":
      return `${name}=\n`;
    case "ini":
      return rng() < 0.3 ? `[${name}]\n` : `${name} =\n`;
    default:
      return `${name}: ${pick(rng, ['""', "null", "{}", "[]", "", "~"])}\n`;
  }
}

function commentLine(format: SubjectFormat, rng: Rng): string {
  const text = pick(rng, [
    "#!/bin/sh -c 'id'",
    "# note",
    "#",
    "#ENC[AES256_GCM,data:AA==,iv:AA==,tag:AA==,type:comment]",
  ]);
  return format === "ini" && rng() < 0.5 ? `;${(text ?? "").slice(1)}\n` : `${text}\n`;
}

/** Mutate `text` once with `op`; returns the same string when the operator found nothing to change. */
function mutateOnce(text: string, op: Operator, format: SubjectFormat, rng: Rng): string {
  const n = text.length;
  const at = n === 0 ? 0 : int(rng, n);
  switch (op) {
    case "flip-bit":
      return n === 0
        ? text
        : text.slice(0, at) +
            String.fromCharCode(text.charCodeAt(at) ^ (1 << int(rng, 8))) +
            text.slice(at + 1);
    case "flip-byte":
      return n === 0 ? text : text.slice(0, at) + String.fromCharCode(int(rng, 256)) + text.slice(at + 1);
    case "delete-byte":
      return text.slice(0, at) + text.slice(at + 1);
    case "insert-byte": {
      const c = rng() < 0.6 ? (pick(rng, INTERESTING) ?? " ") : String.fromCharCode(int(rng, 256));
      return text.slice(0, at) + c + text.slice(at);
    }
    case "duplicate-byte":
      return text.slice(0, at + 1) + text.slice(at);
    case "truncate":
      return text.slice(0, at);
    case "swap-values": {
      const all = rng() < 0.6 ? spans(text, ENC_RE) : readableValueSpans(text).concat(spans(text, ENC_RE));
      if (all.length < 2) return text;
      const i = int(rng, all.length);
      let j = int(rng, all.length - 1);
      if (j >= i) j++;
      const [a, b] = i < j ? [all[i]!, all[j]!] : [all[j]!, all[i]!];
      if (a.end > b.start) return text;
      return (
        text.slice(0, a.start) +
        text.slice(b.start, b.end) +
        text.slice(a.end, b.start) +
        text.slice(a.start, a.end) +
        text.slice(b.end)
      );
    }
    case "rename-key": {
      const span = pick(rng, keySpans(text));
      if (!span) return text;
      const key = text.slice(span.start, span.end);
      const quoted = key.startsWith('"');
      const bare = quoted ? key.slice(1, -1) : key;
      const renamed =
        pick(rng, [
          `${bare}x`,
          bare.slice(0, -1),
          `${bare}_unencrypted`,
          bare.replace(/_unencrypted$/, ""),
          bare.toUpperCase(),
          "data",
          "sops",
          `${bare} `,
        ]) ?? bare;
      return replaceSpan(text, span, quoted ? `"${renamed}"` : renamed);
    }
    case "lastmodified": {
      const span = pick(rng, fieldValueSpans(text, "lastmodified"));
      if (!span) return text;
      if (rng() < 0.5) return mutateInside(text, span, rng);
      const digits = spans(text.slice(span.start, span.end), /\d/g);
      const d = pick(rng, digits);
      if (!d) return text;
      const p = span.start + d.start;
      const c = String((Number(text[p]) + 1 + int(rng, 8)) % 10);
      return text.slice(0, p) + c + text.slice(p + 1);
    }
    case "mac": {
      const span = pick(rng, fieldValueSpans(text, "mac"));
      if (!span) return text;
      const other = pick(rng, spans(text, ENC_RE));
      if (other && rng() < 0.3) return replaceSpan(text, span, text.slice(other.start, other.end));
      if (rng() < 0.1) return replaceSpan(text, span, pick(rng, ['""', "", "garbage", "5"]) ?? "");
      return mutateInside(text, span, rng);
    }
    case "iv":
    case "tag":
    case "enc-data": {
      const part = op === "enc-data" ? "data" : op;
      const field = spans(text, new RegExp(`ENC\\[AES256_GCM,[^\\]]*?${part}:([^,\\]]*)`, "g"), 1);
      const ecIv = op === "iv" ? fieldValueSpans(text, "iv").concat(fieldValueSpans(text, "salt")) : [];
      const ecData = op === "enc-data" ? fieldValueSpans(text, "ciphertext") : [];
      const span = pick(rng, field.concat(ecIv, ecData));
      if (!span) return text;
      if (rng() < 0.15) {
        // Shorter, longer, or the same field of another value.
        const r = rng();
        if (r < 0.33) return replaceSpan(text, span, text.slice(span.start, span.end - 4));
        if (r < 0.66) return replaceSpan(text, span, `${text.slice(span.start, span.end)}AAAA`);
        const others = spans(text, new RegExp(`${part}:([^,\\]]*)`, "g"), 1);
        const o = pick(rng, others);
        if (o) return replaceSpan(text, span, text.slice(o.start, o.end));
      }
      return mutateInside(text, span, rng);
    }
    case "enc-type": {
      const span = pick(rng, spans(text, /ENC\[[^\]]*?type:([a-z]*)\]/g, 1));
      if (!span) return text;
      return replaceSpan(
        text,
        span,
        pick(rng, ["str", "int", "float", "bool", "comment", "bytes", "time", ""]) ?? "str",
      );
    }
    case "key-enc": {
      const span = pick(rng, fieldValueSpans(text, "enc").concat(fieldValueSpans(text, "passphraseURI")));
      if (!span) return text;
      return mutateInside(text, span, rng);
    }
    case "metadata-field": {
      const name = pick(rng, METADATA_FIELDS) ?? "version";
      const span = pick(rng, fieldValueSpans(text, name));
      if (!span) return text;
      if (rng() < 0.5) return mutateInside(text, span, rng);
      return replaceSpan(
        text,
        span,
        pick(rng, [
          '""',
          "true",
          "false",
          "0",
          "2",
          "1e3",
          "null",
          "[]",
          "^$",
          ".*",
          "3.13.2",
          '"_unencrypted"',
        ]) ?? "",
      );
    }
    case "readable-value": {
      const span = pick(rng, readableValueSpans(text));
      if (!span) return text;
      if (rng() < 0.3)
        return replaceSpan(
          text,
          span,
          pick(rng, ['""', "x", "1", "true", "null", "0x10", "2024-01-01"]) ?? "x",
        );
      return mutateInside(text, span, rng);
    }
    case "add-empty-key": {
      const starts = lineStarts(text);
      const p = pick(rng, starts) ?? 0;
      const line = emptyKeyLine(format, rng);
      const indent = rng() < 0.5 ? "" : "  ";
      return text.slice(0, p) + indent + line + text.slice(p);
    }
    case "add-comment": {
      const p = pick(rng, lineStarts(text)) ?? 0;
      return text.slice(0, p) + commentLine(format, rng) + text.slice(p);
    }
    case "stacked":
      return text;
  }
}

const SINGLE_OPERATORS = OPERATORS.filter((o) => o !== "stacked");

export function mutate(bytes: Uint8Array, op: Operator, format: SubjectFormat, rng: Rng): Uint8Array {
  let text = toText(bytes);
  if (op === "stacked") {
    const count = 2 + int(rng, 2);
    for (let k = 0; k < count; k++)
      text = mutateOnce(text, pick(rng, SINGLE_OPERATORS) ?? "flip-byte", format, rng);
  } else {
    text = mutateOnce(text, op, format, rng);
  }
  return toBytes(text);
}

// ---------------------------------------------------------------- decrypting

/**
 * The resolver with unwrap memoised per (key id, enc): the genuine enc unwraps once; an enc
 * that a mutation changed goes to the real provider every time. Each call gets its own copy
 * (decryptDocument zeroes the key it was given).
 */
function memoResolver(deps: ProviderDeps): KeyResolver {
  const base = resolverFor(deps);
  const memo = new Map<string, Promise<Uint8Array | null>>();
  const wrapKey = (key: MasterKey): MasterKey => ({
    kind: key.kind,
    id: key.id,
    wrap: (secret, options) => key.wrap(secret, options),
    toMetadata: (enc, createdAt) => key.toMetadata(enc, createdAt),
    async unwrap(enc, options) {
      const k = `${key.kind}\0${key.id}\0${enc}`;
      let p = memo.get(k);
      if (p === undefined) {
        p = key.unwrap(enc, options);
        if (memo.size < 64) memo.set(k, p);
      }
      const v = await p;
      return v === null ? null : Uint8Array.from(v);
    },
  });
  const resolve = (entry: KeyEntry): MasterKey | null => {
    const key = base(entry);
    return key === null ? null : wrapKey(key);
  };
  return Object.assign(resolve, { order: base.order ?? [] });
}

const resolvers = new WeakMap<ProviderDeps, KeyResolver>();
function resolverOf(deps: ProviderDeps): KeyResolver {
  let r = resolvers.get(deps);
  if (r === undefined) {
    r = memoResolver(deps);
    resolvers.set(deps, r);
  }
  return r;
}

const envelopeKeys = new WeakMap<ProviderDeps, Map<string, MasterKey | null>>();
function envelopeKey(deps: ProviderDeps, kind: string, keyId: string): MasterKey | null {
  let m = envelopeKeys.get(deps);
  if (m === undefined) {
    m = new Map();
    envelopeKeys.set(deps, m);
  }
  const k = `${kind}\0${keyId}`;
  if (!m.has(k)) {
    let key: MasterKey | null;
    try {
      const real = keysFromUserInput(kind, keyId, deps)[0];
      if (real === undefined) key = null;
      else {
        // Reuse memoisation through a throwaway SOPS entry resolver is not possible here: memoise directly.
        const memo = new Map<string, Promise<Uint8Array | null>>();
        key = {
          kind: real.kind,
          id: real.id,
          wrap: (s, o) => real.wrap(s, o),
          toMetadata: (e, d) => real.toMetadata(e, d),
          async unwrap(enc, options) {
            let p = memo.get(enc);
            if (p === undefined) {
              p = real.unwrap(enc, options);
              if (memo.size < 16) memo.set(enc, p);
            }
            const v = await p;
            return v === null ? null : Uint8Array.from(v);
          },
        };
      }
    } catch {
      key = null;
    }
    if (m.size < 64) m.set(k, key);
    else return key;
  }
  return m.get(k) ?? null;
}

export interface Decrypted {
  readonly bytes: Uint8Array;
  readonly branches: Branch[] | null;
}

/** The machine's steps (decrypt-payload.ts), in process, with the memoised resolver. */
export async function decryptCore(subject: Subject, bytes: Uint8Array): Promise<Decrypted> {
  if (subject.format === "envelope") {
    const opts = {
      kinds: KEY_KINDS,
      resolve: (kind: string, keyId: string) => envelopeKey(subject.deps, kind, keyId),
    };
    if (subject.machineId !== undefined) {
      try {
        return {
          bytes: await decryptConfig(bytes, { ...opts, machineId: subject.machineId }),
          branches: null,
        };
      } catch (err) {
        if (!(err instanceof BootsealError) || err.code !== "MAC_MISMATCH") throw err;
      }
    }
    return { bytes: await decryptConfig(bytes, opts), branches: null };
  }
  const doc =
    subject.format === "json" || subject.format === "binary"
      ? loadJsonOrBinary(bytes, KEY_KINDS)
      : loadEncrypted(bytes, subject.format, KEY_KINDS);
  checkEncryptedComments(doc.branches, doc.metadata);
  const branches = await decryptDocument(doc.branches, doc.metadata, { resolve: resolverOf(subject.deps) });
  return { bytes: doc.codec.emitPlain(branches, {}), branches };
}

/** decryptPayload itself: the fetcher's function, real providers, no memo. */
export async function decryptViaPayload(subject: Subject, bytes: Uint8Array): Promise<Decrypted> {
  const inputType = subject.format === "dotenv" || subject.format === "ini" ? subject.format : undefined;
  const out = await decryptPayload(bytes, {
    deps: subject.deps,
    machine: subject.machineId ?? null,
    ...(inputType ? { inputType } : {}),
  });
  return { bytes: out, branches: null };
}

/**
 * What the MAC and the AAD vouch for in a decrypted tree, under the original rule: every
 * non-empty leaf the MAC hashes, in walk order, with its AAD path when it is encrypted.
 */
export function authenticatedView(branches: readonly Branch[], metadata: Metadata): string {
  const parts: string[] = [];
  transformBranches(branches, compileRule(metadata.rule), {
    scalar(value, visit) {
      const bytes = plaintextBytes(value);
      if (bytes !== null && bytes.length > 0 && (visit.encrypted || !metadata.macOnlyEncrypted)) {
        parts.push(`${visit.encrypted ? `E${visit.aad}` : "R"}=${Buffer.from(bytes).toString("hex")}`);
      }
      return value;
    },
    comment: (c) => c,
  });
  return parts.join("\n");
}

function viewOfPlain(subject: Subject, bytes: Uint8Array): string | null {
  if (subject.metadata === null || subject.format === "envelope") return null;
  try {
    return authenticatedView(codecFor(subject.format).parsePlain(bytes), subject.metadata);
  } catch {
    return null;
  }
}

/** Plaintexts of the documents made here: no refusal may quote them. */
const SECRET_MARKERS = ["hunter2", "c2VjcmV0", "joined", "content: secret"];

const equalBytes = (a: Uint8Array, b: Uint8Array): boolean => Buffer.compare(a, b) === 0;

/**
 * Judge one decryption attempt against the invariant. `core`: the in-process result for the
 * same bytes, when this attempt is decryptPayload's: its output has lost the tree (value types
 * included, which the MAC does not cover), so a different output must equal the core's, which
 * was judged on the tree.
 */
export async function judge(
  subject: Subject,
  attempt: () => Promise<Decrypted>,
  core?: { readonly outcome: Outcome; readonly bytes: Uint8Array | null },
): Promise<Outcome> {
  let result: Decrypted;
  try {
    result = await attempt();
  } catch (err) {
    if (!(err instanceof BootsealError)) {
      const name = err instanceof Error ? err.constructor.name : typeof err;
      return { kind: "violation", detail: `non-Bootseal exception ${name}` };
    }
    if (err.code === "INTERNAL") return { kind: "violation", detail: "INTERNAL error" };
    if (err.message.includes("\n") || SECRET_MARKERS.some((m) => err.message.includes(m))) {
      return { kind: "violation", detail: `${err.code} message with more than one line or a plaintext` };
    }
    return { kind: "refused", code: err.code };
  }
  if (subject.original === null)
    return { kind: "violation", detail: "a document refused when genuine decrypted" };
  if (equalBytes(result.bytes, subject.original)) return { kind: "same" };
  if (core !== undefined) {
    if (core.bytes !== null && equalBytes(core.bytes, result.bytes)) return core.outcome;
    return { kind: "violation", detail: "decryptPayload gave another plaintext than the in-process path" };
  }
  if (subject.format === "binary" || subject.format === "envelope" || subject.view === null) {
    return { kind: "violation", detail: "different plaintext" };
  }
  const view =
    result.branches !== null && subject.metadata !== null
      ? authenticatedView(result.branches, subject.metadata)
      : viewOfPlain(subject, result.bytes);
  if (view === subject.view) return { kind: "outside-mac" };
  return { kind: "violation", detail: "different authenticated content (a secret or a MAC-covered value)" };
}

// ---------------------------------------------------------------- subjects

const read = (rel: string): Uint8Array => new Uint8Array(readFileSync(join(VECTORS_DIR, rel)));

function vectorFormat(path: string): Format {
  if (path.endsWith(".yaml")) return "yaml";
  if (path.endsWith(".json")) return "json";
  if (path.endsWith(".env")) return "dotenv";
  if (path.endsWith(".ini")) return "ini";
  return "binary";
}

interface Made {
  readonly name: string;
  readonly format: Format;
  readonly plain: string;
  readonly rule?: SelectionRule;
  readonly macOnlyEncrypted?: boolean;
  readonly groups?: number;
}

const MADE: readonly Made[] = [
  {
    name: "made.yaml",
    format: "yaml",
    plain:
      "# top comment\ndb:\n  user: admin\n  password: hunter2 # trailing\n  port: 5432\n  ratio: 1.5\n  on: true\nlist:\n  - a\n  - b\n  - nested: [1, 2]\nempty: ''\nnothing: null\nplain_unencrypted: visible\nmulti: |\n  line one\n  line two\n",
  },
  {
    name: "made-regex.yaml",
    format: "yaml",
    plain:
      "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  token: c2VjcmV0\nstringData:\n  pw: hunter2\n",
    rule: { kind: "encrypted_regex", value: "^(data|stringData)$" },
  },
  {
    name: "made-maconly.yaml",
    format: "yaml",
    plain: "host: example.org\npassword: hunter2\nport_unencrypted: 443\n",
    macOnlyEncrypted: true,
  },
  { name: "made-shamir.yaml", format: "yaml", plain: "a: 1\nb: two\n", groups: 2 },
  {
    name: "made.json",
    format: "json",
    plain:
      '{\n  "user": "admin",\n  "password": "hunter2",\n  "n": 12345678901234567890,\n  "f": 2.5,\n  "b": false,\n  "arr": [1, "x", {"k": "v"}],\n  "e": "",\n  "z": null,\n  "x_unencrypted": "open"\n}\n',
  },
  {
    name: "made.env",
    format: "dotenv",
    plain: "USER=admin\nPASSWORD=hunter2\nEMPTY=\nMULTI=a\\nb\nOPEN_unencrypted=yes\n",
  },
  {
    name: "made.ini",
    format: "ini",
    plain:
      "; comment\n[db]\nuser = admin\npassword = hunter2\n\n[other section]\nkey = value\nopen_unencrypted = yes\n",
  },
  {
    name: "made.bin",
    format: "binary",
    plain: "#cloud-config\nruncmd: [echo joined]\n\u0000\u00ff binary tail",
  },
];

/** The vectors with their keys, documents made now for every format, and EncryptedConfigs. */
export async function buildSubjects(): Promise<Subject[]> {
  const ageFlux = readFileSync(join(VECTORS_DIR, "keys/age-fluxcd-test.agekey"), "utf8");
  const pgpKey1 = readFileSync(
    join(VECTORS_DIR, "keys/pgp-FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4.private.asc"),
    "utf8",
  );
  const pgpDeps: ProviderDeps = { env: {}, pgp: { privateKeys: [pgpKey1], gpg: false } };
  const fluxDeps: ProviderDeps = { env: { SOPS_AGE_KEY: ageFlux } };
  const subjects: Subject[] = [];
  const add = (
    name: string,
    format: SubjectFormat,
    bytes: Uint8Array,
    deps: ProviderDeps,
    machineId?: string,
  ) =>
    subjects.push({
      name,
      format,
      bytes,
      deps,
      ...(machineId !== undefined ? { machineId } : {}),
      original: null,
      view: null,
      metadata: null,
    });

  for (const rel of [
    "sops-repo/yaml/example.yaml",
    "sops-repo/yaml/format.enc.yaml",
    "sops-repo/yaml/comments.enc.yaml",
    "sops-repo/yaml/no_mac.yaml",
    "sops-repo/json/example.json",
    "sops-repo/json/format.enc.json",
    "sops-repo/json/static_github.json",
    "sops-repo/ini/example.ini",
    "sops-repo/ini/format.enc.ini",
    "sops-repo/dotenv/format.enc.env",
    "sops-repo/binary/example.txt",
  ]) {
    add(rel.slice(rel.lastIndexOf("/") + 1), vectorFormat(rel), read(rel), pgpDeps);
  }
  for (const rel of ["fluxcd-age/age.yaml", "fluxcd-age/env.env", "fluxcd-age/file.txt"]) {
    add(`fluxcd-${rel.slice(rel.lastIndexOf("/") + 1)}`, vectorFormat(rel), read(rel), fluxDeps);
  }

  const identity = await generateX25519Identity();
  const second = await generateX25519Identity();
  const deps: ProviderDeps = { env: { SOPS_AGE_KEY: `${identity}\n${second}` } };
  const [key] = keysFromUserInput("age", await identityToRecipient(identity), deps);
  const [key2] = keysFromUserInput("age", await identityToRecipient(second), deps);
  if (key === undefined || key2 === undefined) throw new Error("age keys");
  for (const m of MADE) {
    const codec = codecFor(m.format);
    const branches = codec.parsePlain(utf8.encode(m.plain));
    const enc = await encryptDocument(branches, {
      keyGroups: m.groups === 2 ? [[key], [key2]] : [[key]],
      ...(m.rule ? { rule: m.rule } : {}),
      ...(m.macOnlyEncrypted ? { macOnlyEncrypted: true } : {}),
      singleValue: codec.singleValue,
    });
    add(m.name, m.format, emitEncrypted(m.format, enc.branches, enc.metadata, KEY_KINDS), deps);
  }
  const payload = utf8.encode("#cloud-config\nwrite_files: [{path: /etc/x, content: secret}]\n");
  const env1 = await encryptConfig(payload, { key, kinds: KEY_KINDS, iterations: 10_000 });
  add("envelope.json", "envelope", utf8.encode(env1), deps);
  const env2 = await encryptConfig(payload, {
    key,
    kinds: KEY_KINDS,
    iterations: 10_000,
    machineId: "ns/m1",
  });
  add("envelope-bound.json", "envelope", utf8.encode(env2), deps, "ns/m1");

  for (const s of subjects) {
    try {
      const r = await decryptCore(s, s.bytes);
      s.original = r.bytes;
      if (s.format !== "envelope" && r.branches !== null) {
        const doc =
          s.format === "json" || s.format === "binary"
            ? loadJsonOrBinary(s.bytes, KEY_KINDS)
            : loadEncrypted(s.bytes, s.format, KEY_KINDS);
        s.metadata = doc.metadata;
        s.view = authenticatedView(r.branches, doc.metadata);
      }
    } catch (err) {
      // Only no_mac.yaml may be refused as it is; anything else is a broken subject.
      if (!s.name.startsWith("no_mac")) throw err;
    }
  }
  return subjects;
}

/** How much of the work each subject gets: EncryptedConfig costs a PBKDF2 per decrypt. */
export function weightOf(subject: Subject): number {
  return subject.format === "envelope" ? 0.25 : 1;
}

// ---------------------------------------------------------------- the loop

export interface RunOptions {
  readonly subjects: readonly Subject[];
  readonly mutations: number;
  readonly seed: number;
  /** Every `payloadEvery`-th mutation also goes through decryptPayload (0: never). */
  readonly payloadEvery?: number;
  /** First index (to resume or to reproduce one). */
  readonly start?: number;
  readonly onProgress?: (done: number) => void;
}

export function emptyReport(): FuzzReport {
  return { mutations: 0, unchanged: 0, outcomes: {}, byOperator: {}, violations: [] };
}

function count(report: FuzzReport, op: string, outcome: Outcome, path: "core" | "payload"): void {
  const key = outcome.kind === "refused" ? `refused:${outcome.code}` : outcome.kind;
  const k = path === "core" ? key : `payload ${key}`;
  report.outcomes[k] = (report.outcomes[k] ?? 0) + 1;
  const per = report.byOperator[op] ?? {};
  per[k] = (per[k] ?? 0) + 1;
  report.byOperator[op] = per;
}

/** Mutation `index` of `seed`: which subject, which operator, which bytes. Pure. */
export function mutationAt(
  subjects: readonly Subject[],
  seed: number,
  index: number,
): { subject: Subject; op: Operator; bytes: Uint8Array } {
  const rng = prng(mix(seed, index));
  const total = subjects.reduce((s, x) => s + weightOf(x), 0);
  let r = rng() * total;
  let subject = subjects[subjects.length - 1]!;
  for (const s of subjects) {
    r -= weightOf(s);
    if (r < 0) {
      subject = s;
      break;
    }
  }
  const op = OPERATORS[int(rng, OPERATORS.length)]!;
  return { subject, op, bytes: mutate(subject.bytes, op, subject.format, rng) };
}

export async function runFuzz(options: RunOptions, report: FuzzReport = emptyReport()): Promise<FuzzReport> {
  const start = options.start ?? 0;
  for (let i = start; i < start + options.mutations; i++) {
    const { subject, op, bytes } = mutationAt(options.subjects, options.seed, i);
    report.mutations++;
    if (equalBytes(bytes, subject.bytes)) {
      report.unchanged++;
      continue;
    }
    const paths: ("core" | "payload")[] = ["core"];
    if (options.payloadEvery && i % options.payloadEvery === 0) paths.push("payload");
    let core: { outcome: Outcome; bytes: Uint8Array | null } | undefined;
    for (const path of paths) {
      let coreBytes: Uint8Array | null = null;
      const outcome =
        path === "core"
          ? await judge(subject, async () => {
              const r = await decryptCore(subject, bytes);
              coreBytes = r.bytes;
              return r;
            })
          : await judge(subject, () => decryptViaPayload(subject, bytes), core);
      if (path === "core") core = { outcome, bytes: coreBytes };
      count(report, op, outcome, path);
      if (outcome.kind === "violation") {
        report.violations.push({
          subject: subject.name,
          operator: op,
          seed: options.seed,
          index: i,
          path,
          detail: outcome.detail ?? "",
        });
      }
    }
    if (options.onProgress && (i + 1) % 10_000 === 0) options.onProgress(i + 1 - start);
  }
  return report;
}
