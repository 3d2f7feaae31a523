/**
 * The INI codec (sops stores/ini/store.go; docs/sops-format.md sections 6.5, 7.4). ./ini-syntax.ts is the
 * gopkg.in/ini.v1 grammar; this file maps it to the sops tree the way sops's store does:
 *
 * - each section is a top-level key whose value is a mapping of str values; keys outside
 *   any section sit in `DEFAULT`, which is always the first item (empty or not);
 * - a section's comment is the first item of its mapping, a key's comment (the lines above
 *   it and its inline comment) the item right after the key; both lose leading `;#` and
 *   spaces; top-level comments cannot exist and are dropped on output, as sops drops them;
 * - metadata is the `[sops]` section, flattened without prefix, with newlines written as the
 *   two characters `\n` (3.13.2 and before 3.13.0) and read back from both that form and
 *   the real newlines (triple-quoted values) 3.13.0/3.13.1 wrote.
 */
import { BootsealError } from "../../../errors.ts";
import type { Branch, Comment, Entry, Mapping } from "../document.ts";
import { comment, entry, mapping, str } from "../document.ts";
import type { Codec } from "./codec.ts";
import { byteString, bytesOf, scalarText, strValue, textOf } from "./flat-text.ts";
import type { FlatPair } from "./flatten.ts";
import { flattenMetadata, unflattenMetadata } from "./flatten.ts";
import type { IniKey, IniSection } from "./ini-syntax.ts";
import { parseIni, putKey, writeIni } from "./ini-syntax.ts";

const SOPS_SECTION = "sops";

function badInput(message: string): never {
  throw new BootsealError("BAD_INPUT", `INI: ${message}`);
}

function text(bs: string, what: string): string {
  const t = textOf(bs);
  if (t === null) badInput(`${what} is not valid UTF-8`);
  return t;
}

/** sops stripCommentChar: all leading `;` and spaces, or all leading `#` and spaces. */
function stripCommentChar(c: string): string {
  if (c.startsWith(";")) return c.replace(/^[; ]+/, "");
  if (c.startsWith("#")) return c.replace(/^[# ]+/, "");
  return c;
}

/** sops treeItemFromSection. */
function sectionToEntry(section: IniSection): Entry {
  const name = text(section.name, "a section name");
  const items: (Entry | Comment)[] = [];
  if (section.comment) items.push(comment(text(stripCommentChar(section.comment), `a comment in [${name}]`)));
  for (const key of section.keys) {
    items.push(entry(text(key.name, `a key name in [${name}]`), str(strValue(key.value))));
    if (key.comment) items.push(comment(text(stripCommentChar(key.comment), `a comment in [${name}]`)));
  }
  return entry(name, mapping(items));
}

function parseTree(bytes: Uint8Array): Mapping {
  return mapping(parseIni(byteString(bytes)).map(sectionToEntry));
}

function isSopsSection(item: Entry | Comment): item is Entry {
  return item.kind === "entry" && item.key === SOPS_SECTION;
}

/** sops encodeTree: the tree back to the library's model. */
function treeToSections(branch: Branch): IniSection[] {
  const sections: IniSection[] = [];
  for (const item of branch.items) {
    if (item.kind === "comment") continue;
    if (item.key.length === 0) badInput("empty section name");
    if (item.value.kind !== "map") {
      throw new BootsealError(
        "UNREPRESENTABLE",
        "Error marshaling to INI: Error encoding section: Section values should always be TreeBranches",
      );
    }
    const section: IniSection = { name: byteString(item.key), comment: "", keys: [] };
    let last: IniKey | undefined;
    for (const [i, sub] of item.value.items.entries()) {
      if (sub.kind === "comment") {
        // First item: the section's comment; later: the comment of the key before it (the
        // last one wins); a comment with no key before it is dropped, as sops drops it.
        if (i === 0) section.comment = byteString(sub.text);
        else if (last) last.comment = byteString(sub.text);
        continue;
      }
      if (sub.key.length === 0) badInput(`empty key name in section ${JSON.stringify(item.key)}`);
      // sops would print Go's %v of a nested value ("[{a b}]"): refuse instead.
      if (sub.value.kind !== "scalar") badInput(`nested value in section ${JSON.stringify(item.key)}`);
      last = putKey(section, byteString(sub.key), byteString(scalarText(sub.value)));
    }
    sections.push(section);
  }
  return sections;
}

function onlyBranch(branches: readonly Branch[]): Branch {
  const [branch] = branches;
  if (branch === undefined || branches.length > 1) badInput("an INI file holds exactly one document");
  return branch;
}

function metadataSection(pairs: readonly FlatPair[]): IniSection {
  const section: IniSection = { name: SOPS_SECTION, comment: "", keys: [] };
  // EscapeNewlines: the double escape every sops version but 3.13.0/3.13.1 writes.
  for (const [name, value] of pairs)
    putKey(section, byteString(name), byteString(value.replaceAll("\n", "\\n")));
  return section;
}

export const iniCodec: Codec = {
  format: "ini",

  parsePlain(bytes) {
    const branch = parseTree(bytes);
    if (branch.items.some(isSopsSection)) {
      throw new BootsealError(
        "ALREADY_ENCRYPTED",
        "INI: the file has a [sops] section: it is already encrypted",
      );
    }
    return [branch];
  },

  parseEncrypted(bytes) {
    const all = parseTree(bytes);
    const found = all.items.filter(isSopsSection);
    if (found.length > 1) badInput("duplicate [sops] section");
    const [sops] = found;
    // An empty [sops] section yields no metadata tree in sops either (a nil branch).
    if (sops === undefined || sops.value.kind !== "map" || sops.value.items.length === 0) {
      throw new BootsealError("NOT_ENCRYPTED", "sops metadata not found");
    }
    const pairs: FlatPair[] = [];
    for (const item of sops.value.items) {
      if (item.kind === "comment") continue;
      const value = item.value.kind === "scalar" && item.value.type === "str" ? item.value.value : null;
      if (typeof value !== "string") badInput(`metadata value of ${JSON.stringify(item.key)} is not text`);
      pairs.push([item.key, value.replaceAll("\\n", "\n")]);
    }
    return {
      branches: [mapping(all.items.filter((item) => !isSopsSection(item)))],
      metadata: unflattenMetadata(pairs),
    };
  },

  emitPlain(branches) {
    return bytesOf(writeIni(treeToSections(onlyBranch(branches))));
  },

  emitEncrypted(branches, metadata) {
    const branch = onlyBranch(branches);
    if (branch.items.some(isSopsSection)) badInput("a section named 'sops' is reserved for the metadata");
    const sections = treeToSections(branch);
    sections.push(metadataSection(flattenMetadata(metadata)));
    return bytesOf(writeIni(sections));
  },
};
