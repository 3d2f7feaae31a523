/**
 * The dotenv codec (sops stores/dotenv/store.go; docs/sops-format.md sections 6.4, 7.3).
 *
 * Deliberately not a "real" dotenv parser: sops splits lines on `\n`, takes everything before
 * the first `=` as the key (spaces kept, no `export`, no quotes) and turns the two characters
 * `\n` in a value into a newline. Any smarter parsing would change keys, and so AADs.
 * Metadata is every top-level key starting `sops_`, flattened (./flatten.ts).
 */
import { BootsealError } from "../../../errors.ts";
import type { Branch, Comment, Entry, Mapping } from "../document.ts";
import { comment, entry, mapping, str } from "../document.ts";
import type { Codec } from "./codec.ts";
import { byteString, bytesOf, scalarText, strValue, textOf } from "./flat-text.ts";
import type { FlatPair } from "./flatten.ts";
import { flattenMetadata, unflattenMetadata } from "./flatten.ts";
import { CappedText } from "./output.ts";

const SOPS_PREFIX = "sops_";

function badInput(message: string): never {
  throw new BootsealError("BAD_INPUT", `dotenv: ${message}`);
}

function text(bs: string, line: number, what: string): string {
  const t = textOf(bs);
  if (t === null) badInput(`${what} is not valid UTF-8 at line ${line}`);
  return t;
}

/** sops LoadPlainFile: every line is a comment or KEY=value; empty lines vanish. */
function parseLines(bytes: Uint8Array): Mapping {
  const items: (Entry | Comment)[] = [];
  const lines = byteString(bytes).split("\n");
  for (const [index, line] of lines.entries()) {
    const lineNo = index + 1;
    if (line.length === 0) continue;
    if (line[0] === "#") {
      items.push(comment(text(line.slice(1), lineNo, "comment")));
      continue;
    }
    const eq = line.indexOf("=");
    // A bare `\r` line (CRLF file) also lands here, as it does in sops.
    if (eq === -1) badInput(`invalid line ${lineNo}: no '='`);
    const key = text(line.slice(0, eq), lineNo, "key");
    items.push(entry(key, str(strValue(line.slice(eq + 1).replaceAll("\\n", "\n")))));
  }
  return mapping(items);
}

function isMetadataKey(item: Entry | Comment): item is Entry {
  return item.kind === "entry" && item.key.startsWith(SOPS_PREFIX);
}

function onlyBranch(branches: readonly Branch[]): Branch {
  // sops writes branches[0] and silently drops the rest; refuse rather than lose data.
  const [branch] = branches;
  if (branch === undefined || branches.length > 1) badInput("a dotenv file holds exactly one document");
  return branch;
}

/** sops EmitPlainFile, as a byte string: one line per item, each ending in `\n`. */
function emitLines(branch: Branch, out: CappedText): void {
  for (const item of branch.items) {
    if (item.kind === "comment") {
      out.push(`#${byteString(item.text)}\n`);
      continue;
    }
    const value = item.value;
    if (value.kind !== "scalar") {
      throw new BootsealError(
        "UNREPRESENTABLE",
        `cannot use complex value in dotenv file; offending key ${byteString(item.key)}`,
      );
    }
    let valueText = byteString(scalarText(value));
    // Only Go strings get the newline escape; ValToString output has no newline anyway.
    if (value.type === "str") valueText = valueText.replaceAll("\n", "\\n");
    out.push(`${byteString(item.key)}=${valueText}\n`);
  }
}

function emitFlat(out: CappedText, pairs: readonly FlatPair[]): void {
  for (const [name, value] of pairs)
    out.push(`${byteString(name)}=${byteString(value).replaceAll("\n", "\\n")}\n`);
}

export const dotenvCodec: Codec = {
  format: "dotenv",

  parsePlain(bytes) {
    const branch = parseLines(bytes);
    if (branch.items.some(isMetadataKey)) {
      throw new BootsealError(
        "ALREADY_ENCRYPTED",
        "dotenv: the file has 'sops_' keys: it is already encrypted",
      );
    }
    return [branch];
  },

  parseEncrypted(bytes) {
    const all = parseLines(bytes);
    const pairs: FlatPair[] = [];
    const items: (Entry | Comment)[] = [];
    for (const item of all.items) {
      if (!isMetadataKey(item)) {
        items.push(item);
        continue;
      }
      const value = item.value.kind === "scalar" && item.value.type === "str" ? item.value.value : null;
      if (typeof value !== "string") badInput(`metadata value of ${JSON.stringify(item.key)} is not text`);
      pairs.push([item.key.slice(SOPS_PREFIX.length), value]);
    }
    if (pairs.length === 0) throw new BootsealError("NOT_ENCRYPTED", "sops metadata not found");
    return { branches: [mapping(items)], metadata: unflattenMetadata(pairs) };
  },

  emitPlain(branches) {
    const out = new CappedText("dotenv");
    emitLines(onlyBranch(branches), out);
    return bytesOf(out.join());
  },

  emitEncrypted(branches, metadata) {
    const branch = onlyBranch(branches);
    // sops SerializeMetadata: a user key with the prefix would be read back as metadata.
    const clash = branch.items.find(isMetadataKey);
    if (clash) badInput(`key ${JSON.stringify(clash.key)} uses the reserved prefix 'sops_'`);
    const out = new CappedText("dotenv");
    emitLines(branch, out);
    emitFlat(out, flattenMetadata(metadata, SOPS_PREFIX));
    return bytesOf(out.join());
  },
};
