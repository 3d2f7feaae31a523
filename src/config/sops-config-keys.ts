/**
 * Master keys named in `.sops.yaml`, turned into metadata entries (`enc: ""`) the way sops's
 * config loader builds its keys (config/config.go and each keysource's constructor). Each
 * kind's syntax and identity live in its provider file; this walks the registry. Pure: no
 * file system.
 */
import { KEY_TYPES, keyIdentity } from "../../providers/keys/index.ts";
import {
  type ConfigItem,
  NO_SHORTHAND_CONTEXT,
  type ShorthandContext,
} from "../../providers/keys/key-type.ts";
import type { KeyEntry, KeyFieldValue } from "../envelope/sops/master-key.ts";
import { bad, isNull, keyList, map, seq, str, type Tree } from "./sops-config-yaml.ts";

/** sops keeps the first of two keys of the same kind with the same identity (deduplicateKeygroup). */
export function dedupGroup(group: readonly KeyEntry[]): KeyEntry[] {
  const seen = new Set<string>();
  return group.filter((e) => {
    const id = `${e.kind}/${keyIdentity(e)}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

/** A mapping item's fields as Go strings, string maps where the YAML has a mapping. */
function mappingItem(v: Tree, what: string): ConfigItem {
  const out = new Map<string, KeyFieldValue>();
  for (const [name, value] of map(v, what)) {
    if (isNull(value)) continue;
    if (value.t === "map") {
      const inner: Record<string, string> = {};
      for (const [k, x] of value.m) {
        const s = str(x, `${what} ${name} value`);
        // sops would dereference a nil pointer here; refuse instead.
        if (s === undefined) throw bad(`${what.split(" ")[0]} ${name} values must be strings`);
        inner[k] = s;
      }
      out.set(name, inner);
    } else {
      out.set(name, str(value, name) ?? "");
    }
  }
  return out;
}

/** extractMasterKeys: merged groups first, then each kind in registry order; de-duplicated. */
export function keyGroupFromConfig(v: Tree, depth = 0): KeyEntry[] {
  if (depth > 16) throw bad("key_groups merge nests too deeply");
  const g = map(v, "key group");
  const keys: KeyEntry[] = [];
  for (const sub of seq(g.get("merge"), "merge")) keys.push(...keyGroupFromConfig(sub, depth + 1));
  for (const type of KEY_TYPES) {
    const { groupKey, groupItem } = type.config;
    for (const item of seq(g.get(groupKey), groupKey)) {
      const parsed =
        groupItem === "string" ? (str(item, groupKey) ?? "") : mappingItem(item, `${groupKey} key`);
      keys.push(...type.entriesFromConfig(parsed));
    }
  }
  return dedupGroup(keys);
}

/** A creation rule's shorthand key fields, as written; turned into entries when the rule is used. */
export type ShorthandKeys = readonly { readonly kind: string; readonly texts: readonly string[] }[];

/** getKeyGroupsFromCreationRule's shorthand fields; validated now (with no CLI context). */
export function shorthandFromConfig(rule: ReadonlyMap<string, Tree>): ShorthandKeys {
  const out = KEY_TYPES.map((type) => ({
    kind: type.kind,
    texts: keyList(rule.get(type.config.shorthandKey), type.config.shorthandKey),
  }));
  shorthandEntries(out, NO_SHORTHAND_CONTEXT);
  return out;
}

/** The single group of a shorthand rule; no de-duplication (sops keeps duplicates). */
export function shorthandEntries(keys: ShorthandKeys, context: ShorthandContext): KeyEntry[] {
  const entries: KeyEntry[] = [];
  for (const { kind, texts } of keys) {
    const type = KEY_TYPES.find((t) => t.kind === kind);
    for (const text of texts) {
      const entry = type?.entryFromText(text, context);
      if (entry) entries.push(entry);
    }
  }
  return entries;
}
