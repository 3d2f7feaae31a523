/**
 * A `#cloud-config` payload read the way cloud-init 22.4.2 reads it (YAML 1.1, values through
 * cloud-init-values.ts), down to the three modules bootseal applies:
 *
 *   bootcmd      run first (cloud-init's init stage, before write_files)
 *   write_files  path, content, encoding, permissions, owner, append, defer
 *   runcmd       the bootstrap command, after every file is written
 *
 *   users, groups  users_groups (cloud-init-users.ts), after the files that are not deferred
 *   ntp            (cloud-init-ntp.ts), after users_groups
 *
 * and the keys of the modules handed to the machine's cloud-init (cloud-init-single.ts:
 * disk_setup, fs_setup, device_aliases, mounts, mount_default_fields, swap), kept as read.
 *
 * --skip-module leaves a named module out with a warning. Any other top-level key is a module
 * bootseal does not run: BAD_INPUT naming it, or with --allow-unknown-modules one warning line
 * per key. The text is user-data as cloud-init hands it to its modules: a `## template: jinja`
 * payload already rendered (cloud-init-jinja.ts). Messages never quote content or commands.
 */
import { LineCounter, parseDocument, type Tags } from "yaml";
import { boundedTokens, tooDeep, tooDeepAt } from "../../envelope/sops/codecs/yaml-limits.ts";
import { BootsealError } from "../../errors.ts";
import { type NtpPlan, parseNtp } from "./cloud-init-ntp.ts";
import { parseUsersGroups, type UsersGroups } from "./cloud-init-users.ts";
import {
  decodePerms,
  extractContents,
  extractions,
  extractUserGroup,
  isPyMap,
  type PyValue,
  pyStr,
  toPy,
  translateBool,
} from "./cloud-init-values.ts";

/** cloud-init's default mode for write_files (cc_write_files.DEFAULT_PERMS). */
export const CLOUD_INIT_DEFAULT_MODE = 0o644;
/** cloud.distro.default_owner. */
const DEFAULT_OWNER = "root:root";

/**
 * The modules handed to the machine's cloud-init (cloud-init-single.ts), in cloud-init's
 * init-stage order (/etc/cloud/cloud.cfg), with the top-level keys each reads.
 */
export const HANDED_MODULES = [
  { name: "disk_setup", keys: ["disk_setup", "fs_setup", "device_aliases"] },
  { name: "mounts", keys: ["mounts", "mount_default_fields", "swap"] },
] as const;
const HANDED_KEYS = HANDED_MODULES.flatMap((m) => m.keys);

export const CLOUD_CONFIG_MODULES = [
  "bootcmd",
  "write_files",
  "runcmd",
  "users",
  "groups",
  "ntp",
  ...HANDED_KEYS,
] as const;

export interface WriteFileEntry {
  /** 1-based position in write_files, for messages. */
  readonly index: number;
  /** As written (cloud-init takes os.path.abspath of it). */
  readonly path: string;
  readonly content: Uint8Array;
  /** 0: cloud-init does not chmod (the file keeps its mode, or a new one gets 0666 & ~umask). */
  readonly mode: number;
  /** null: unchanged. */
  readonly user: string | null;
  readonly group: string | null;
  readonly append: boolean;
  readonly defer: boolean;
}

/** A runcmd or bootcmd entry: a string for `sh -c`, or a list exec'd as its argv. */
export type CloudCommand = { readonly shell: string } | { readonly argv: readonly string[] };

export interface CloudConfig {
  readonly writeFiles: readonly WriteFileEntry[];
  readonly bootcmd: readonly CloudCommand[];
  readonly runcmd: readonly CloudCommand[];
  /** users_groups (the `users` and `groups` keys) and ntp: null when absent or skipped. */
  readonly usersGroups: UsersGroups | null;
  readonly ntp: NtpPlan | null;
  /** The keys handed to the machine's cloud-init (cloud-init-single.ts), as read. */
  readonly handed: ReadonlyMap<string, PyValue>;
}

export interface CloudConfigParseOptions {
  readonly allowUnknownModules: boolean;
  /** --skip-module: keys (or `users_groups`) left out with one warning line each. */
  readonly skipModules?: readonly string[];
  /** Warnings: unknown modules (when allowed), unknown encodings, undecodable permissions. */
  readonly warn: (line: string) => void;
}

/**
 * PyYAML's implicit types where the yaml library's YAML 1.1 schema reads more: `y`/`n` are
 * strings, a float needs a dot and a signed exponent (`1e3` is a string), a decimal integer
 * has no leading zero (`09` is a string), a base-60 integer starts with 1-9.
 */
const PYYAML_TESTS: readonly {
  readonly tag: string;
  readonly format?: string;
  readonly was: string;
  readonly test: RegExp;
}[] = [
  { tag: "bool", was: "Y|y", test: /^(?:yes|Yes|YES|true|True|TRUE|on|On|ON)$/ },
  { tag: "bool", was: "N|n", test: /^(?:no|No|NO|false|False|FALSE|off|Off|OFF)$/ },
  { tag: "int", was: "[0-9][0-9_]*$", test: /^[-+]?(?:0|[1-9][0-9_]*)$/ },
  { tag: "int", format: "TIME", was: "", test: /^[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+$/ },
  { tag: "float", format: "EXP", was: "", test: /^(?:[-+]?[0-9][0-9_]*\.[0-9_]*|\.[0-9_]+)[eE][-+][0-9]+$/ },
  { tag: "float", was: "\\.[0-9_]*$", test: /^(?:[-+]?[0-9][0-9_]*\.[0-9_]*|\.[0-9_]+)$/ },
];

function pyyamlTags(tags: Tags): Tags {
  return tags.map((t) => {
    if (typeof t !== "object" || !("test" in t) || !(t.test instanceof RegExp)) return t;
    const source = t.test.source;
    const fix = PYYAML_TESTS.find(
      (f) =>
        t.tag === `tag:yaml.org,2002:${f.tag}` &&
        t.format === f.format &&
        (f.was === "" || source.includes(f.was)),
    );
    return fix ? { ...t, test: fix.test } : t;
  }) as Tags;
}

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `cloud-config: ${message}`);
}

/** A key for a message: quoted, at most 64 characters. */
function shown(key: unknown): string {
  const text = typeof key === "string" ? key : String(key);
  return JSON.stringify(text.length > 64 ? `${text.slice(0, 64)}…` : text);
}

function commands(value: PyValue, module: string): CloudCommand[] {
  if (value === null) return [];
  // shellify takes a list; a string would be iterated character by character (a TypeError).
  if (!Array.isArray(value)) throw bad(`${module} must be a list of commands`);
  const out: CloudCommand[] = [];
  (value as readonly PyValue[]).forEach((entry, i) => {
    const where = `${module} entry ${i + 1}`;
    if (entry === null) return; // a YAML comment line in the list: shellify skips it
    if (typeof entry === "string") {
      out.push({ shell: entry });
      return;
    }
    if (!Array.isArray(entry)) throw bad(`${where} must be a string or a list of arguments`);
    const argv = (entry as readonly PyValue[]).map((arg, k) => {
      const text = pyStr(arg);
      if (text === null) throw bad(`${where}: argument ${k + 1} must be a scalar`);
      return text;
    });
    if (argv.length === 0) throw bad(`${where} is an empty list`);
    out.push({ argv });
  });
  return out;
}

function writeFiles(value: PyValue, warn: (line: string) => void): WriteFileEntry[] {
  if (value === null) return [];
  if (!Array.isArray(value)) throw bad("write_files must be a list");
  const out: WriteFileEntry[] = [];
  (value as readonly PyValue[]).forEach((entry, i) => {
    const where = `write_files entry ${i + 1}`;
    if (!isPyMap(entry)) throw bad(`${where} must be a mapping`);
    const get = (key: string): PyValue | undefined => entry.get(key);
    const path = get("path");
    if (path === undefined || path === null || path === "" || path === false || path === 0n) {
      warn(`${where} has no path; skipped (as cloud-init does)`);
      return;
    }
    if (typeof path !== "string") throw bad(`${where}: path must be a string`);
    const content = extractContents(
      get("content") ?? "",
      extractions(get("encoding"), (l) => warn(`${where}: ${l}`)),
    );
    const { user, group } = extractUserGroup(entry.has("owner") ? (get("owner") as PyValue) : DEFAULT_OWNER);
    out.push({
      index: i + 1,
      path,
      content,
      mode: decodePerms(get("permissions"), CLOUD_INIT_DEFAULT_MODE, (l) => warn(`${where}: ${l}`)),
      user,
      group,
      append: translateBool(get("append")),
      defer: translateBool(get("defer")),
    });
  });
  return out;
}

/** The modules --skip-module names left out, each with one warning line. */
function withoutSkipped(
  root: ReadonlyMap<unknown, PyValue>,
  options: CloudConfigParseOptions,
): ReadonlyMap<unknown, PyValue> {
  const skip = new Set(options.skipModules ?? []);
  if (skip.size === 0) return root;
  const kept = new Map(root);
  for (const key of root.keys()) {
    const named =
      skip.has(String(key)) ||
      (skip.has("users_groups") && (key === "users" || key === "groups")) ||
      HANDED_MODULES.some((m) => skip.has(m.name) && (m.keys as readonly unknown[]).includes(key));
    if (!named) continue;
    kept.delete(key);
    options.warn(`cloud-config: the module ${shown(key)} is skipped (--skip-module)`);
  }
  return kept;
}

/** The handed modules' keys a config has, as read. */
function handedKeys(root: ReadonlyMap<unknown, PyValue>): ReadonlyMap<string, PyValue> {
  const out = new Map<string, PyValue>();
  for (const key of HANDED_KEYS) if (root.has(key)) out.set(key, root.get(key) as PyValue);
  return out;
}

/** Parses the payload; throws BAD_INPUT for anything bootseal would not apply as cloud-init does. */
export function parseCloudConfig(bytes: Uint8Array, options: CloudConfigParseOptions): CloudConfig {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw bad("not UTF-8 text");
  }
  const lines = new LineCounter();
  const deep = tooDeepAt(boundedTokens(text, lines));
  if (deep !== undefined) throw tooDeep(lines.linePos(deep).line);
  // PyYAML: YAML 1.1, later duplicate keys win, integers exact.
  const doc = parseDocument(text, {
    version: "1.1",
    customTags: pyyamlTags,
    uniqueKeys: false,
    intAsBigInt: true,
    prettyErrors: false,
  });
  const first = doc.errors[0];
  // yaml's own messages quote the source, which is secret here: code and position only.
  if (first) throw bad(`YAML error ${first.code} at offset ${first.pos[0]}`);
  const parsed = toPy(doc);
  if (parsed === null)
    return { writeFiles: [], bootcmd: [], runcmd: [], usersGroups: null, ntp: null, handed: new Map() };
  if (!isPyMap(parsed)) throw bad("must be a mapping of modules");
  const root = withoutSkipped(parsed, options);
  for (const key of root.keys()) {
    if ((CLOUD_CONFIG_MODULES as readonly unknown[]).includes(key)) continue;
    if (!options.allowUnknownModules) {
      throw bad(
        `the module ${shown(key)} is not supported (bootseal applies ${CLOUD_CONFIG_MODULES.join(", ")}; ` +
          "--allow-unknown-modules skips others with a warning)",
      );
    }
    options.warn(
      `cloud-config: the module ${shown(key)} is not supported; skipped (--allow-unknown-modules)`,
    );
  }
  return {
    bootcmd: commands(root.get("bootcmd") ?? null, "bootcmd"),
    writeFiles: writeFiles(root.get("write_files") ?? null, options.warn),
    runcmd: commands(root.get("runcmd") ?? null, "runcmd"),
    usersGroups: parseUsersGroups(root),
    ntp: parseNtp(root),
    handed: handedKeys(root),
  };
}
