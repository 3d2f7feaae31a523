/**
 * The sops key service's messages (./keyservice.proto) on the wire, and the ONE map between
 * its `Key` oneof and the key registry's kinds and metadata fields. The messages are a
 * handful of strings and byte fields, so they are encoded here (protobuf's wire format:
 * varints and length-delimited fields) rather than through a .proto loaded at run time,
 * which would have to travel beside the bundle and the single executable.
 */
import type { KeyEntry, KeyFieldValue } from "../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../src/errors.ts";
import type { KeyKind } from "./index.ts";

/** One field of a key message and the metadata field it carries. */
export interface KeyMessageField {
  readonly name: string;
  readonly number: number;
  /** The field of bootseal's (and sops's) metadata entry. */
  readonly entry: string;
  /** map<string, string> (kms `context`); otherwise a string. */
  readonly map?: boolean;
}

export interface KeyMessage {
  /** Its name in `Key`'s oneof key_type. */
  readonly oneof: string;
  readonly number: number;
  readonly message: string;
  /** The registry's kind; null where this build has no provider. */
  readonly kind: KeyKind | null;
  readonly fields: readonly KeyMessageField[];
}

const f = (name: string, number: number, entry = name): KeyMessageField => ({ name, number, entry });

/** `Key`'s oneof, in field-number order (keyservice.proto; sops's keyservice.KeyFromMasterKey). */
export const KEY_MESSAGES: readonly KeyMessage[] = [
  {
    oneof: "kms_key",
    number: 1,
    message: "KmsKey",
    kind: "kms",
    fields: [f("arn", 1), f("role", 2), { ...f("context", 3), map: true }, f("aws_profile", 4)],
  },
  { oneof: "pgp_key", number: 2, message: "PgpKey", kind: "pgp", fields: [f("fingerprint", 1, "fp")] },
  { oneof: "gcp_kms_key", number: 3, message: "GcpKmsKey", kind: "gcp_kms", fields: [f("resource_id", 1)] },
  {
    oneof: "azure_keyvault_key",
    number: 4,
    message: "AzureKeyVaultKey",
    kind: "azure_kv",
    fields: [f("vault_url", 1), f("name", 2), f("version", 3)],
  },
  {
    oneof: "vault_key",
    number: 5,
    message: "VaultKey",
    kind: "hc_vault",
    fields: [f("vault_address", 1), f("engine_path", 2), f("key_name", 3)],
  },
  { oneof: "age_key", number: 6, message: "AgeKey", kind: "age", fields: [f("recipient", 1)] },
  { oneof: "hckms_key", number: 7, message: "HckmsKey", kind: "hckms", fields: [f("key_id", 1)] },
];

/** A decoded `Key`: which message, and its fields by metadata name (empty ones left out). */
export interface WireKey {
  readonly message: KeyMessage;
  readonly fields: ReadonlyMap<string, KeyFieldValue>;
}

/** The `Key` of a metadata entry (its `enc` and created_at do not travel). */
export function wireKeyOf(entry: KeyEntry): WireKey {
  const message = KEY_MESSAGES.find((m) => m.kind === entry.kind);
  if (message === undefined)
    throw new BootsealError("UNSUPPORTED", `${entry.kind} keys have no key service message`);
  const fields = new Map<string, KeyFieldValue>();
  for (const field of message.fields) {
    const value = entry.fields.get(field.entry);
    if (value !== undefined) fields.set(field.entry, value);
  }
  return { message, fields };
}

/** The metadata entry a `Key` describes, with `enc`; null when this build has no such kind. */
export function entryOf(key: WireKey, enc: string): KeyEntry | null {
  if (key.message.kind === null) return null;
  return { kind: key.message.kind, enc, fields: key.fields };
}

// --- protobuf wire format -----------------------------------------------------------

const LENGTH_DELIMITED = 2;
const utf8 = new TextEncoder();
const text = new TextDecoder("utf-8", { fatal: true });

function varint(n: number): number[] {
  const out: number[] = [];
  let v = n;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function field(number: number, bytes: Uint8Array): Uint8Array {
  return concat([
    Uint8Array.from([...varint(number * 8 + LENGTH_DELIMITED), ...varint(bytes.length)]),
    bytes,
  ]);
}

/** Fields with a value of `number` (proto3 leaves empty scalars out). */
function bytesField(number: number, bytes: Uint8Array | undefined): Uint8Array[] {
  return bytes === undefined || bytes.length === 0 ? [] : [field(number, bytes)];
}

function encodeKey(key: WireKey): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const spec of key.message.fields) {
    const value = key.fields.get(spec.entry);
    if (typeof value === "string") parts.push(...bytesField(spec.number, utf8.encode(value)));
    else if (value !== undefined) {
      for (const [k, v] of Object.entries(value)) {
        parts.push(field(spec.number, concat([field(1, utf8.encode(k)), field(2, utf8.encode(v))])));
      }
    }
  }
  return field(key.message.number, concat(parts));
}

/** A length-delimited field's bytes; other wire types are skipped (unknown fields). */
interface RawField {
  readonly number: number;
  readonly bytes: Uint8Array | null;
}

function malformed(what: string): BootsealError {
  return new BootsealError("BAD_INPUT", `malformed key service message: ${what}`);
}

function readFields(buf: Uint8Array): RawField[] {
  const out: RawField[] = [];
  let at = 0;
  const readVarint = (): number => {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const b = buf[at++];
      if (b === undefined) throw malformed("truncated varint");
      result += (b & 0x7f) * scale;
      scale *= 128;
      if (b < 0x80) return result;
    }
    throw malformed("varint too long");
  };
  while (at < buf.length) {
    const tag = readVarint();
    const number = Math.floor(tag / 8);
    const wire = tag % 8;
    if (number === 0) throw malformed("field number 0");
    if (wire === 0) readVarint();
    else if (wire === 1 || wire === 5) at += wire === 1 ? 8 : 4;
    else if (wire === LENGTH_DELIMITED) {
      const length = readVarint();
      if (length > buf.length - at) throw malformed("field runs past the end");
      out.push({ number, bytes: buf.subarray(at, at + length) });
      at += length;
      continue;
    } else throw malformed(`wire type ${wire}`);
    if (at > buf.length) throw malformed("field runs past the end");
    out.push({ number, bytes: null });
  }
  return out;
}

/** The last occurrence wins, as protobuf reads a repeated scalar or message field. */
function last(fields: readonly RawField[], number: number): Uint8Array | undefined {
  let found: Uint8Array | undefined;
  for (const f of fields) if (f.number === number && f.bytes !== null) found = f.bytes;
  return found;
}

function decodeString(bytes: Uint8Array): string {
  try {
    return text.decode(bytes);
  } catch {
    throw malformed("a string is not UTF-8");
  }
}

/** null: no key type set (sops answers "Must provide a key"). */
function decodeKey(bytes: Uint8Array | undefined): WireKey | null {
  if (bytes === undefined) return null;
  const raw = readFields(bytes);
  let chosen: { message: KeyMessage; bytes: Uint8Array } | undefined;
  for (const r of raw) {
    const message = KEY_MESSAGES.find((m) => m.number === r.number);
    if (message && r.bytes !== null) chosen = { message, bytes: r.bytes };
  }
  if (!chosen) return null;
  const inner = readFields(chosen.bytes);
  const fields = new Map<string, KeyFieldValue>();
  for (const spec of chosen.message.fields) {
    if (spec.map) {
      const map: Record<string, string> = {};
      for (const r of inner) {
        if (r.number !== spec.number || r.bytes === null) continue;
        const pair = readFields(r.bytes);
        const k = last(pair, 1);
        const v = last(pair, 2);
        map[k ? decodeString(k) : ""] = v ? decodeString(v) : "";
      }
      if (Object.keys(map).length > 0) fields.set(spec.entry, map);
    } else {
      const value = last(inner, spec.number);
      if (value !== undefined && value.length > 0) fields.set(spec.entry, decodeString(value));
    }
  }
  return { message: chosen.message, fields };
}

/** EncryptRequest {key = 1; plaintext = 2} and DecryptRequest {key = 1; ciphertext = 2}. */
export interface KeyRequest {
  readonly key: WireKey | null;
  readonly data: Uint8Array;
}

export function encodeRequest(request: KeyRequest): Uint8Array {
  const key = request.key ? [field(1, encodeKey(request.key))] : [];
  return concat([...key, ...bytesField(2, request.data)]);
}

export function decodeRequest(bytes: Uint8Array): KeyRequest {
  const raw = readFields(bytes);
  return { key: decodeKey(last(raw, 1)), data: last(raw, 2) ?? new Uint8Array(0) };
}

/** EncryptResponse {ciphertext = 1} and DecryptResponse {plaintext = 1}. */
export function encodeResponse(data: Uint8Array): Uint8Array {
  return concat(bytesField(1, data));
}

export function decodeResponse(bytes: Uint8Array): Uint8Array {
  return last(readFields(bytes), 1) ?? new Uint8Array(0);
}
