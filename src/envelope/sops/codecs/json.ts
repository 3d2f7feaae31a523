/**
 * The JSON codec (sops stores/json/store.go, Store). Parsing is ./json-tokens.ts, output is
 * ./json-emit.ts; this file handles the `sops` member and the one-branch rule.
 */
import { BootsealError } from "../../../errors.ts";
import type { Branch, Entry, Mapping } from "../document.ts";
import type { Codec, EmitOptions } from "./codec.ts";
import { emitJsonDocument } from "./json-emit.ts";
import { parseJsonDocument } from "./json-tokens.ts";
import { outputBytes } from "./output.ts";

/** The top-level key that holds the metadata in YAML, JSON and binary files. */
export const METADATA_KEY = "sops";

function hasMetadataKey(branch: Branch): boolean {
  return branch.items.some((item) => item.kind === "entry" && item.key === METADATA_KEY);
}

/**
 * Split the `sops` member off a document, as sops' ExtractMetadata does: it must appear once
 * and hold a mapping; its position does not matter.
 */
export function extractMetadata(doc: Mapping): { branch: Branch; metadata: Mapping } {
  let metadata: Mapping | undefined;
  const rest: Entry[] = [];
  for (const item of doc.items) {
    if (item.kind !== "entry") continue;
    if (item.key !== METADATA_KEY) {
      rest.push(item);
      continue;
    }
    if (metadata !== undefined)
      throw new BootsealError("BAD_INPUT", "json: duplicate top-level 'sops' member");
    if (item.value.kind !== "map")
      throw new BootsealError("BAD_INPUT", "json: 'sops' member is not an object");
    metadata = item.value;
  }
  if (metadata === undefined) throw new BootsealError("NOT_ENCRYPTED", "sops metadata not found");
  return { branch: { kind: "map", items: rest }, metadata };
}

/**
 * sops writes only the first branch of a tree as JSON and silently drops the rest (a
 * multi-document YAML converted with --output-type json). Dropping documents is data loss,
 * so bootseal refuses instead.
 */
function onlyBranch(branches: readonly Branch[]): Branch {
  const [branch] = branches;
  if (branch === undefined || branches.length !== 1) {
    throw new BootsealError("BAD_INPUT", "json: a JSON document holds exactly one branch");
  }
  return branch;
}

export const jsonCodec: Codec = {
  format: "json",

  parsePlain(bytes: Uint8Array): Branch[] {
    const doc = parseJsonDocument(bytes);
    if (hasMetadataKey(doc))
      throw new BootsealError("ALREADY_ENCRYPTED", "json: document already has sops metadata");
    return [doc];
  },

  parseEncrypted(bytes: Uint8Array): { branches: Branch[]; metadata: Mapping } {
    const { branch, metadata } = extractMetadata(parseJsonDocument(bytes));
    return { branches: [branch], metadata };
  },

  emitPlain(branches: readonly Branch[], options?: EmitOptions): Uint8Array {
    return outputBytes("json", emitJsonDocument(onlyBranch(branches), options?.indent));
  },

  emitEncrypted(branches: readonly Branch[], metadata: Mapping, options?: EmitOptions): Uint8Array {
    const branch = onlyBranch(branches);
    // sops SerializeMetadata: a user key named `sops` would collide with the metadata.
    if (hasMetadataKey(branch))
      throw new BootsealError("BAD_INPUT", "json: 'sops' is a reserved top-level key");
    const doc: Mapping = {
      kind: "map",
      items: [...branch.items, { kind: "entry", key: METADATA_KEY, value: metadata }],
    };
    return outputBytes("json", emitJsonDocument(doc, options?.indent));
  },
};
