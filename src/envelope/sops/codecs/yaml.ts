/**
 * The YAML codec: sops' YAML store (stores/yaml/store.go, go-yaml v3), byte for byte.
 * Reading: ./yaml-parse.ts (go-yaml typing, comment placement). Writing: ./yaml-emit.ts
 * (sops' node building) and ./yaml-emitter.ts (go-yaml's emitter). The metadata is the
 * top-level `sops` key: read from the first document, removed from all, and written into
 * every document on output (docs/sops-format.md section 6.3).
 */
import { BootsealError } from "../../../errors.ts";
import type { Branch, Entry, Mapping } from "../document.ts";
import type { Codec, EmitOptions } from "./codec.ts";
import { outputBytes } from "./output.ts";
import { emitYaml } from "./yaml-emit.ts";
import { parseYaml } from "./yaml-parse.ts";

const SOPS_KEY = "sops";
const DEFAULT_INDENT = 4;

function decode(bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (cause) {
    throw new BootsealError("BAD_INPUT", "yaml: input is not valid UTF-8", { cause });
  }
}

function indentOf(options: EmitOptions | undefined): number {
  const indent = options?.indent ?? DEFAULT_INDENT;
  if (indent === "\t") throw new BootsealError("USAGE", "yaml: indentation must be a number of spaces");
  return indent;
}

const isSopsEntry = (item: Branch["items"][number]): item is Entry =>
  item.kind === "entry" && item.key === SOPS_KEY;

export const yamlCodec: Codec = {
  format: "yaml",

  parsePlain(bytes: Uint8Array): Branch[] {
    const branches = parseYaml(decode(bytes));
    if (branches.some((b) => b.items.some(isSopsEntry))) {
      throw new BootsealError("ALREADY_ENCRYPTED", "yaml: the document already has a top-level 'sops' key");
    }
    return branches;
  },

  parseEncrypted(bytes: Uint8Array): { branches: Branch[]; metadata: Mapping } {
    const parsed = parseYaml(decode(bytes));
    const found = parsed[0]?.items.find(isSopsEntry);
    if (!found) throw new BootsealError("NOT_ENCRYPTED", "sops metadata not found");
    if (found.value.kind !== "map")
      throw new BootsealError("BAD_INPUT", "yaml: the 'sops' key does not hold a mapping");
    const branches = parsed.map(
      (b): Branch => ({ ...b, items: b.items.filter((item) => !isSopsEntry(item)) }),
    );
    return { branches, metadata: found.value };
  },

  emitPlain(branches: readonly Branch[], options?: EmitOptions): Uint8Array {
    return outputBytes("yaml", emitYaml(branches, indentOf(options)));
  },

  emitEncrypted(branches: readonly Branch[], metadata: Mapping, options?: EmitOptions): Uint8Array {
    const sops: Entry = { kind: "entry", key: SOPS_KEY, value: metadata };
    const withMetadata = branches.map((b): Branch => ({ ...b, items: [...b.items, sops] }));
    return outputBytes("yaml", emitYaml(withMetadata, indentOf(options)));
  },
};
