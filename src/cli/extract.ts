/**
 * `--extract '["key"][0]'`: the sops path syntax (JSON-quoted keys, integer list indices),
 * looked up in the first document, as sops does.
 */

import { formatGoFloat } from "../envelope/sops/canonical.ts";
import type { Format } from "../envelope/sops/codecs/codec.ts";
import { codecFor } from "../envelope/sops/codecs/index.ts";
import { unsupportedJsonValue } from "../envelope/sops/codecs/json-emit.ts";
import type { Branch, Value } from "../envelope/sops/document.ts";
import { BootsealError } from "../errors.ts";

export function parseExtractPath(text: string): (string | number)[] {
  const steps: (string | number)[] = [];
  const re = /\[(?:"((?:[^"\\]|\\.)*)"|(\d+))\]/y;
  let pos = 0;
  while (pos < text.length) {
    re.lastIndex = pos;
    const m = re.exec(text);
    if (!m)
      throw new BootsealError("BAD_TREE_PATH", `--extract: cannot parse the path at "${text.slice(pos)}"`);
    steps.push(m[1] !== undefined ? (JSON.parse(`"${m[1]}"`) as string) : Number(m[2]));
    pos = re.lastIndex;
  }
  if (steps.length === 0)
    throw new BootsealError("BAD_TREE_PATH", `--extract wants a path such as '["key"][0]'`);
  return steps;
}

export function extractPath(branches: readonly Branch[], path: string): Value {
  const steps = parseExtractPath(path);
  let node: Value | undefined = branches[0];
  // sops's words for a key or an index that is not there, which scripts match.
  const missing = (what: string): never => {
    throw new BootsealError("USAGE", `error truncating tree: component ${what}`);
  };
  for (const step of steps) {
    if (node?.kind === "map" && typeof step === "string") {
      const found: Branch["items"][number] | undefined = node.items.find(
        (i) => i.kind === "entry" && i.key === step,
      );
      node = found?.kind === "entry" ? found.value : missing(`['${step}'] not found`);
    } else if (node?.kind === "seq" && typeof step === "number") {
      const item: Value | undefined = node.items.filter((i) => i.kind !== "comment")[step] as
        | Value
        | undefined;
      node = item ?? missing(`[${step}] accesses out of bounds`);
    } else {
      node = undefined;
    }
    if (node === undefined) throw new BootsealError("USAGE", `--extract: ${path} is not in the document`);
  }
  return node as Value;
}

/**
 * As sops prints it: a string as its bare bytes; any other scalar through the output
 * store's value encoder (YAML ends it with a newline, JSON does not); a mapping as a
 * document of the output format.
 */
export function renderExtracted(value: Value, format: Format): Uint8Array {
  if (value.kind === "map") return codecFor(format).emitPlain([value]);
  if (value.kind === "seq")
    throw new BootsealError("UNSUPPORTED", "--extract of a whole list is not supported");
  if (value.type === "str" || value.type === "bytes") {
    return typeof value.value === "string" ? new TextEncoder().encode(value.value) : value.value;
  }
  // Go's json.Marshal refuses these (sops: "Error dumping tree: json: unsupported value: NaN").
  if (format === "json" && value.type === "float" && !Number.isFinite(value.value))
    throw new BootsealError("UNREPRESENTABLE", unsupportedJsonValue(value.value));
  const text =
    value.type === "null"
      ? "null"
      : value.type === "float"
        ? formatGoFloat(value.value)
        : value.type === "time"
          ? value.value
          : String(value.value);
  return new TextEncoder().encode(format === "json" ? text : `${text}\n`);
}
