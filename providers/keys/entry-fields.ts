/**
 * Fields of a cloud key's metadata entry as sops writes and reads them: shared by the
 * providers that keep a created_at, string fields and a base64 `enc`.
 */
import type { KeyEntry } from "../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../src/errors.ts";

/** created_at as sops writes it: RFC 3339, UTC, second precision. */
export function formatCreatedAt(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** Optional created_at of an entry: absent in keys built from flags or .sops.yaml; must parse when there. */
export function checkCreatedAt(value: unknown, label: string): void {
  if (value === undefined) return;
  if (typeof value !== "string" || Number.isNaN(Date.parse(value))) {
    throw new BootsealError("BAD_INPUT", `${label}: created_at is not a time`);
  }
}

/** A string field of a metadata entry, or "" when absent. */
export function stringField(fields: ReadonlyMap<string, unknown>, name: string, label: string): string {
  const value = fields.get(name);
  if (value === undefined) return "";
  if (typeof value !== "string") throw new BootsealError("BAD_INPUT", `${label}: ${name} is not a string`);
  return value;
}

/** Standard base64 as Go's StdEncoding accepts it (padding required, no whitespace). */
export function decodeStdBase64(enc: string, label: string): Uint8Array {
  if (enc === "" || enc.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(enc)) {
    throw new BootsealError("BAD_INPUT", `${label}: enc is not standard base64`);
  }
  return new Uint8Array(Buffer.from(enc, "base64"));
}

/** A fresh wrap's entry for the kinds whose fields are their id fields, created_at, enc (in that order). */
export function entryWithCreatedAt(
  kind: string,
  idFields: readonly (readonly [string, string])[],
  enc: string,
  createdAt: Date,
): KeyEntry {
  return {
    kind,
    enc,
    fields: new Map([...idFields, ["created_at", formatCreatedAt(createdAt)], ["enc", enc]]),
  };
}
