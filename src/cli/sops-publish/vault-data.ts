/**
 * A decrypted tree as the JSON sops publish writes to Vault (sops.EmitAsMap, then the Vault
 * client's encoding/json). Kept as sops has it, quirks included, so a reader of the secret sees
 * the same data whichever tool published it: comments are dropped from mappings, every document
 * of a file is merged into one object (later keys win), and a mapping or comment inside a list
 * is not converted (Go encodes a TreeBranch as `[{"Key":…,"Value":…}]` and a comment as
 * `{"Value":…}`).
 */
import type { Branch, Comment, Mapping, Scalar, Value } from "../../envelope/sops/document.ts";
import { BootsealError } from "../../errors.ts";

const lossy = new TextDecoder();

function scalarJson(s: Scalar): string {
  switch (s.type) {
    case "str":
    case "bytes":
      // Go's json replaces invalid UTF-8 with U+FFFD, as this decoder does.
      return JSON.stringify(typeof s.value === "string" ? s.value : lossy.decode(s.value));
    case "int":
      return s.value.toString();
    case "float":
      if (!Number.isFinite(s.value))
        throw new BootsealError("BAD_INPUT", `json: unsupported value: ${goFloatName(s.value)}`);
      // Go and JavaScript switch to exponents at the same bounds (1e21, 1e-6).
      return String(s.value);
    case "bool":
      return String(s.value);
    case "time":
      return JSON.stringify(s.value);
    case "null":
      return "null";
  }
}

function goFloatName(n: number): string {
  return Number.isNaN(n) ? "NaN" : n > 0 ? "+Inf" : "-Inf";
}

/** A value inside a list: Go's encoding of the raw tree types. */
function rawJson(v: Value | Comment): string {
  if (v.kind === "comment") return `{"Value":${JSON.stringify(v.text)}}`;
  if (v.kind === "map") {
    const items = v.items.map((item) =>
      item.kind === "comment"
        ? `{"Key":{"Value":${JSON.stringify(item.text)}},"Value":null}`
        : `{"Key":${JSON.stringify(item.key)},"Value":${rawJson(item.value)}}`,
    );
    return `[${items.join(",")}]`;
  }
  if (v.kind === "seq") return `[${v.items.map(rawJson).join(",")}]`;
  return scalarJson(v);
}

function valueJson(v: Value): string {
  return v.kind === "map" ? mapJson([v]) : rawJson(v);
}

/** Go's encoding of a map: keys sorted, the last value of a repeated key. */
function mapJson(branches: readonly Mapping[]): string {
  const entries = new Map<string, string>();
  for (const branch of branches)
    for (const item of branch.items) if (item.kind === "entry") entries.set(item.key, valueJson(item.value));
  const keys = [...entries.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${keys.map((k) => `${JSON.stringify(k)}:${entries.get(k)}`).join(",")}}`;
}

/** The JSON text of the secret's data. */
export function vaultDataJson(branches: readonly Branch[]): string {
  return mapJson(branches);
}

/**
 * Whether sops could ever find an existing secret equal to this data (go-cmp's cmp.Equal of
 * the map against the secret read back): the Vault client decodes numbers as json.Number and
 * lists as plain values, so a number, a timestamp, or a mapping or comment inside a list never
 * compares equal, and sops writes a new version every time.
 */
export function comparableWithStored(branches: readonly Branch[]): boolean {
  const ok = (v: Value | Comment, inList: boolean): boolean => {
    if (v.kind === "comment") return !inList;
    if (v.kind === "map")
      return !inList && v.items.every((item) => item.kind === "comment" || ok(item.value, false));
    if (v.kind === "seq") return v.items.every((item) => ok(item, true));
    return v.type !== "int" && v.type !== "float" && v.type !== "time";
  };
  return branches.every((b) => ok(b, false));
}
