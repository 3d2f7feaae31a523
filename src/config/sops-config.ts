/**
 * `.sops.yaml`: finding it, reading its creation rules, and picking the rule for a file,
 * as sops 3.13 does (config/config.go; docs/sops-format.md section 10.4).
 *
 * One deliberate difference: the whole file is validated when it is parsed (regexes,
 * key strings, selection fields of every rule), so a broken rule fails at once rather
 * than only when a file happens to select it.
 */
import { readFileSync, statSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { parseDocument } from "yaml";
import type { KeyEntry } from "../envelope/sops/master-key.ts";
import { RULE_KINDS, type SelectionRule } from "../envelope/sops/metadata.ts";
import { compileRegex, type GoRegexp } from "../envelope/sops/walk.ts";
import { BootsealError } from "../errors.ts";
import { SizeBoundedLru } from "../size-bounded-lru.ts";
import {
  keyGroupFromConfig,
  type ShorthandKeys,
  shorthandEntries,
  shorthandFromConfig,
} from "./sops-config-keys.ts";
import { bad, bool, int, isNull, map, seq, str, type Tree, toTree } from "./sops-config-yaml.ts";

/** Kept here for the service and tests that compare creation-rule keys; the registry owns it. */
export { keyIdentity } from "../../providers/keys/index.ts";

function compilePathRegex(pattern: string): GoRegexp {
  try {
    return compileRegex(pattern);
  } catch (cause) {
    throw bad(`path_regex: ${(cause as Error).message}`);
  }
}

export const SOPS_CONFIG_NAME = ".sops.yaml";
const IGNORED_CONFIG_NAME = ".sops.yml";
/** sops's maxDepth: the directory itself and 99 parents. */
const MAX_DEPTH = 100;

export interface SopsStoresConfig {
  readonly yamlIndent?: number;
  readonly jsonIndent?: number;
  readonly jsonBinaryIndent?: number;
}

/** A rule as parsed; keys are resolved by matchCreationRule (the shorthand `kms` needs the CLI context). */
export interface ParsedCreationRule {
  readonly pathRegex: string | null;
  readonly regex: GoRegexp | null;
  readonly keyGroups: readonly (readonly KeyEntry[])[] | null;
  /** Shorthand single group, in sops's order (age, pgp, kms, gcp_kms, azure_keyvault, hc_vault). */
  readonly shorthand: { readonly keys: ShorthandKeys; readonly awsProfile: string } | null;
  readonly threshold: number | null;
  readonly rule: SelectionRule | null;
  readonly macOnlyEncrypted: boolean;
}

export interface SopsConfig {
  readonly path: string;
  /** null: no `creation_rules` key (sops then behaves as if there were no config file). */
  readonly creationRules: readonly ParsedCreationRule[] | null;
  /** `destination_rules`, for `publish` (empty when the file has none). */
  readonly destinationRules: readonly DestinationRule[];
  readonly stores: SopsStoresConfig;
}

/**
 * Where `publish` sends a file (sops's publish.Destination), normalised as sops's
 * constructors do: a Vault path and mount end in `/`, the mount defaults to `secret/`, and a
 * KV version other than 1 or 2 is 2.
 */
export type PublishDestination =
  | { readonly kind: "s3"; readonly bucket: string; readonly prefix: string }
  | { readonly kind: "gcs"; readonly bucket: string; readonly prefix: string }
  | {
      readonly kind: "vault";
      /** "" means the Vault client's default (VAULT_ADDR, else https://127.0.0.1:8200). */
      readonly address: string;
      readonly path: string;
      readonly mount: string;
      readonly kvVersion: 1 | 2;
    };

/** One `destination_rules` entry. */
export interface DestinationRule {
  readonly pathRegex: string | null;
  readonly regex: GoRegexp | null;
  /** null: the rule names no destination (publish refuses the file). */
  readonly destination: PublishDestination | null;
  /** Its `recreation_rule`: with keys, S3 and GCS uploads are re-encrypted for them. */
  readonly recreationRule: ParsedCreationRule;
  readonly omitExtensions: boolean;
}

export interface CreationRule {
  readonly pathRegex: string | null;
  /** Each entry has `enc: ""` and its kind's metadata fields (no `created_at`). */
  readonly keyGroups: readonly (readonly KeyEntry[])[];
  /** `shamir_threshold`; null when not set (0 in the file means not set, as in sops). */
  readonly threshold: number | null;
  readonly rule: SelectionRule | null;
  readonly macOnlyEncrypted: boolean;
}

export interface SopsConfigLocation {
  readonly path: string;
  /** A `.sops.yml` was seen on the way and ignored (sops prints the same warning). */
  readonly warning?: string;
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * `--config` (explicit), else SOPS_CONFIG, else `.sops.yaml` in `cwd` and its parents (up to
 * 100 levels). An explicit or SOPS_CONFIG path is returned without a search, whether it
 * exists or not (reading it reports that). null: none found, which is not an error.
 */
export function findSopsConfig(
  cwd: string,
  explicit?: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): SopsConfigLocation | null {
  const named = explicit || env.SOPS_CONFIG;
  if (named) return { path: resolve(cwd, named) };
  let dir = resolve(cwd);
  let ignored: string | undefined;
  for (let depth = 0; depth < MAX_DEPTH; depth++) {
    const candidate = join(dir, SOPS_CONFIG_NAME);
    if (isFile(candidate)) {
      return ignored ? { path: candidate, warning: ignoredWarning(ignored, candidate) } : { path: candidate };
    }
    if (!ignored && isFile(join(dir, IGNORED_CONFIG_NAME))) ignored = join(dir, IGNORED_CONFIG_NAME);
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  return null;
}

function ignoredWarning(ignored: string, used: string): string {
  return `ignoring ${ignored}: the config file must be called ${SOPS_CONFIG_NAME}; using ${used}`;
}

/**
 * The last configurations read, by path, with the text they were parsed from: a run over a
 * directory tree asks for the same `.sops.yaml` once per file, and parsing it again each time
 * was a tenth of `updatekeys --recursive`. The file is read every time (a change is seen).
 */
const parsedConfigs = new SizeBoundedLru<string, { readonly text: string; readonly config: SopsConfig }>(
  64,
  () => 1,
);

/** Reads and parses a config file; IO_ERROR when it cannot be read. */
export function loadSopsConfig(path: string): SopsConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new BootsealError("IO_ERROR", `could not read config file ${path}`, { cause: err });
  }
  const seen = parsedConfigs.get(path);
  if (seen?.text === text) return seen.config;
  const config = parseSopsConfig(text, path);
  parsedConfigs.set(path, { text, config });
  return config;
}

function parseRule(v: Tree | undefined, where: string): ParsedCreationRule {
  const r = map(v, where);
  const pathRegex = str(r.get("path_regex"), "path_regex") || null;
  const selected: SelectionRule[] = [];
  for (const kind of RULE_KINDS) {
    const value = str(r.get(kind), kind);
    if (value) selected.push({ kind, value });
  }
  if (selected.length > 1) {
    throw bad(
      "Cannot use more than one of encrypted_suffix, unencrypted_suffix, encrypted_regex, " +
        "unencrypted_regex, encrypted_comment_regex, or unencrypted_comment_regex for the same rule",
    );
  }
  const threshold = int(r.get("shamir_threshold"), "shamir_threshold") ?? 0;
  if (threshold < 0 || threshold > 255) throw bad("shamir_threshold must be between 0 and 255");
  const groups = seq(r.get("key_groups"), "key_groups");
  let keyGroups: KeyEntry[][] | null = null;
  let shorthand: ParsedCreationRule["shorthand"] = null;
  if (groups.length > 0) {
    keyGroups = groups.map((g) => keyGroupFromConfig(g));
  } else {
    // getKeyGroupsFromCreationRule: `kms` keys take the CLI's context, so entries are made at match time.
    const awsProfile = str(r.get("aws_profile"), "aws_profile") ?? "";
    shorthand = { keys: shorthandFromConfig(r), awsProfile };
  }
  return {
    pathRegex,
    regex: pathRegex === null ? null : compilePathRegex(pathRegex),
    keyGroups,
    shorthand,
    threshold: threshold === 0 ? null : threshold,
    rule: selected[0] ?? null,
    macOnlyEncrypted: bool(r.get("mac_only_encrypted"), "mac_only_encrypted"),
  };
}

function withSlash(path: string): string {
  return path.endsWith("/") ? path : `${path}/`;
}

/** sops's parseDestinationRuleForFile checks, made when the file is read (see the top). */
function parseDestinationRule(v: Tree, index: number): DestinationRule {
  const where = `destination_rules[${index}]`;
  const r = map(v, where);
  const pathRegex = str(r.get("path_regex"), "path_regex") || null;
  const field = (name: string) => str(r.get(name), `${where}.${name}`) ?? "";
  const s3Bucket = field("s3_bucket");
  const gcsBucket = field("gcs_bucket");
  const vaultPath = field("vault_path");
  if ([s3Bucket, gcsBucket, vaultPath].filter((b) => b !== "").length > 1) {
    throw bad(
      "more than one destinations were found in a single destination rule, you can only use one per rule",
    );
  }
  let destination: PublishDestination | null = null;
  if (s3Bucket) destination = { kind: "s3", bucket: s3Bucket, prefix: field("s3_prefix") };
  else if (gcsBucket) destination = { kind: "gcs", bucket: gcsBucket, prefix: field("gcs_prefix") };
  else if (vaultPath) {
    const version = int(r.get("vault_kv_version"), `${where}.vault_kv_version`);
    destination = {
      kind: "vault",
      address: field("vault_address"),
      path: withSlash(vaultPath),
      mount: withSlash(field("vault_kv_mount_name") || "secret/"),
      kvVersion: version === 1 ? 1 : 2,
    };
  }
  return {
    pathRegex,
    regex: pathRegex === null ? null : compilePathRegex(pathRegex),
    destination,
    recreationRule: parseRule(r.get("recreation_rule"), `${where}.recreation_rule`),
    omitExtensions: bool(r.get("omit_extensions"), `${where}.omit_extensions`),
  };
}

function indent(stores: ReadonlyMap<string, Tree>, name: string): number | undefined {
  return int(map(stores.get(name), `stores.${name}`).get("indent"), `stores.${name}.indent`);
}

/** Parses `.sops.yaml` text; `path` names the file in errors and in the result. */
export function parseSopsConfig(text: string, path: string): SopsConfig {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
  if (doc.errors.length > 0) {
    throw new BootsealError("BAD_INPUT", `could not parse config file ${path}`, { cause: doc.errors[0] });
  }
  try {
    const top = map(toTree(doc.contents, doc), "config file");
    const rulesNode = top.get("creation_rules");
    const stores = map(top.get("stores"), "stores");
    const storesConfig: SopsStoresConfig = {
      ...(indent(stores, "yaml") === undefined ? {} : { yamlIndent: indent(stores, "yaml") }),
      ...(indent(stores, "json") === undefined ? {} : { jsonIndent: indent(stores, "json") }),
      ...(indent(stores, "json_binary") === undefined
        ? {}
        : { jsonBinaryIndent: indent(stores, "json_binary") }),
    };
    return {
      path,
      creationRules: isNull(rulesNode)
        ? null
        : seq(rulesNode, "creation_rules").map((r, i) => parseRule(r, `creation_rules[${i}]`)),
      destinationRules: seq(top.get("destination_rules"), "destination_rules").map(parseDestinationRule),
      stores: storesConfig,
    };
  } catch (err) {
    if (err instanceof BootsealError) {
      throw new BootsealError(err.code, `${path}: ${err.message}`, { cause: err });
    }
    throw err;
  }
}

export interface MatchOptions {
  /** `--encryption-context`: applied to the shorthand `kms` keys only (key_groups carry their own). */
  readonly kmsEncryptionContext?: Readonly<Record<string, string>>;
}

/**
 * The first rule whose `path_regex` matches `filePath` (made absolute, then relative to
 * `configDir` when it lies under it), or that has no `path_regex`. null: the config has no
 * `creation_rules` (treat it as absent). No match: USAGE "no matching creation rules found".
 */
export function matchCreationRule(
  config: SopsConfig,
  configDir: string,
  filePath: string,
  options: MatchOptions = {},
): CreationRule | null {
  if (config.creationRules === null) return null;
  const dirPrefix = resolve(configDir) + sep;
  const absolute = resolve(filePath);
  const relative = absolute.startsWith(dirPrefix) ? absolute.slice(dirPrefix.length) : absolute;
  const found = config.creationRules.find((r) => r.regex === null || r.regex.test(relative));
  if (!found) throw new BootsealError("USAGE", "no matching creation rules found");
  return resolveCreationRule(found, options);
}

/**
 * The first destination rule with no `path_regex` or one that matches `filePath` as the user
 * gave it (sops matches the raw path here, not the path relative to the config file).
 */
export function matchDestinationRule(config: SopsConfig, filePath: string): DestinationRule {
  const found = config.destinationRules.find((r) => r.regex === null || r.regex.test(filePath));
  if (!found)
    throw new BootsealError("USAGE", "error loading config: no matching destination found in config");
  return found;
}

/** A parsed rule with its keys resolved (the shorthand lists become one group). */
export function resolveCreationRule(found: ParsedCreationRule, options: MatchOptions = {}): CreationRule {
  let keyGroups: readonly (readonly KeyEntry[])[];
  if (found.keyGroups !== null) {
    keyGroups = found.keyGroups;
  } else {
    const s = found.shorthand ?? { keys: [], awsProfile: "" };
    const context = { kmsContext: options.kmsEncryptionContext ?? null, awsProfile: s.awsProfile };
    keyGroups = [shorthandEntries(s.keys, context)];
  }
  return {
    pathRegex: found.pathRegex,
    keyGroups,
    threshold: found.threshold,
    rule: found.rule,
    macOnlyEncrypted: found.macOnlyEncrypted,
  };
}
