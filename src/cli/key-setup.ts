/**
 * Which master keys and rule a new document gets: command-line keys (one group, sops's
 * order) win; otherwise the first matching `.sops.yaml` creation rule.
 */
import { dirname, resolve } from "node:path";
import type { ProviderDeps } from "../../providers/keys/index.ts";
import { KEY_TYPES, keysFromUserInput, keyTypeOf, resolverFor } from "../../providers/keys/index.ts";
import {
  type KeyServices,
  keyServicesFrom,
  resolverThrough,
  throughKeyServices,
} from "../../providers/keys/keyservice-client.ts";
import { newKeyFromEntry } from "../config/rule-keys.ts";
import { findSopsConfig, loadSopsConfig, matchCreationRule } from "../config/sops-config.ts";
import type { KeyResolver, MasterKey } from "../envelope/sops/master-key.ts";
import type { SelectionRule } from "../envelope/sops/metadata.ts";
import { BootsealError, hasCode } from "../errors.ts";
import type { CliIo } from "./command.ts";
import { keyListsFromFlags, parseEncryptionContext, ruleFromFlags } from "./key-flags.ts";

export { masterKeyFromEntry } from "../config/rule-keys.ts";

/** `--age, --pgp, … or --hc-vault-transit`, in registry order. */
const KEY_FLAG_LIST = KEY_TYPES.map((t) => `--${t.flag.flag}`)
  .join(", ")
  .replace(/, ([^,]*)$/, " or $1");

export interface KeySetup {
  readonly groups: MasterKey[][];
  readonly threshold?: number;
  readonly rule?: SelectionRule | null;
  readonly macOnlyEncrypted?: boolean;
  readonly indent?: { yaml?: number; json?: number; binary?: number };
}

/** --keyservice / --enable-local-keyservice (or their variables): who wraps and unwraps data keys. */
export function keyServicesOf(values: Record<string, unknown>): KeyServices {
  const uris = ((values.keyservice as string[] | undefined) ?? [])
    .flatMap((uri) => uri.split(","))
    .map((uri) => uri.trim())
    .filter(Boolean);
  return keyServicesFrom(uris, values["enable-local-keyservice"] !== false);
}

/** Key groups whose wraps go through the key services the flags name. */
export function keysThrough(groups: MasterKey[][], values: Record<string, unknown>): MasterKey[][] {
  const services = keyServicesOf(values);
  return groups.map((group) => group.map((key) => throughKeyServices(key, services)));
}

/** The registry's resolver, its unwraps going through the key services the flags name. */
export function keyResolver(values: Record<string, unknown>, deps: ProviderDeps): KeyResolver {
  return resolverThrough(resolverFor(deps), keyServicesOf(values));
}

/** Keys given with flags (or sops's environment variables): one group. */
export function keysFromFlags(
  values: Record<string, unknown>,
  deps: ProviderDeps,
  env: Readonly<Record<string, string | undefined>>,
  prefix = "",
): MasterKey[] {
  const keys: MasterKey[] = [];
  const context = parseEncryptionContext(values["encryption-context"] as string | undefined);
  for (const { kind, text } of keyListsFromFlags(values, env, prefix)) {
    const type = keyTypeOf(kind);
    if (type?.flag.takesContext && (context || values["aws-profile"])) {
      // A context or profile cannot ride in the key string: build the entry sops would write.
      const shorthand = {
        kmsContext: context ?? null,
        awsProfile: (values["aws-profile"] as string | undefined) ?? "",
      };
      for (const item of text
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean)) {
        const entry = type.entryFromText(item, shorthand);
        if (entry) keys.push(newKeyFromEntry(entry, deps));
      }
    } else {
      keys.push(...keysFromUserInput(kind, text, deps));
    }
  }
  return keys;
}

/** Locates and applies `.sops.yaml` for `file` (relative to the working directory). */
export function setupFromConfig(
  file: string,
  configFlag: string | undefined,
  io: CliIo,
  deps: ProviderDeps,
  context?: Record<string, string>,
): KeySetup | undefined {
  const location = findSopsConfig(io.cwd, configFlag, io.env);
  if (!location) return undefined;
  if (location.warning) io.stderr.write(`bootseal: ${location.warning}\n`);
  const config = loadingConfig(() => loadConfigFile(location.path));
  const rule = loadingConfig(() =>
    matchCreationRule(config, dirname(location.path), resolve(io.cwd, file), {
      kmsEncryptionContext: context,
    }),
  );
  if (!rule) return undefined;
  return {
    groups: rule.keyGroups.map((group) => group.map((entry) => newKeyFromEntry(entry, deps))),
    threshold: rule.threshold ?? undefined,
    rule: rule.rule,
    macOnlyEncrypted: rule.macOnlyEncrypted,
    indent: {
      yaml: config.stores.yamlIndent,
      json: config.stores.jsonIndent,
      binary: config.stores.jsonBinaryIndent,
    },
  };
}

/** `find()`, with a configuration error worded as sops words it ("error loading config: …"). */
function loadingConfig<T>(find: () => T): T {
  try {
    return find();
  } catch (err) {
    if (!hasCode(err, "USAGE", "BAD_INPUT")) throw err;
    throw new BootsealError(err.code, `error loading config: ${err.message}`, { cause: err });
  }
}

/** An unreadable .sops.yaml is a configuration error (sops exits 1), not a local I/O failure. */
export function loadConfigFile(path: string): ReturnType<typeof loadSopsConfig> {
  try {
    return loadSopsConfig(path);
  } catch (err) {
    if (!hasCode(err, "IO_ERROR")) throw err;
    throw new BootsealError("USAGE", err.message, { cause: err });
  }
}

export function keySetup(
  file: string,
  values: Record<string, unknown>,
  io: CliIo,
  deps: ProviderDeps,
): KeySetup {
  const flagKeys = keysFromFlags(values, deps, io.env);
  const flagRule = ruleFromFlags(values);
  const threshold = values["shamir-secret-sharing-threshold"];
  const context = parseEncryptionContext(values["encryption-context"] as string | undefined);
  // As sops (getEncryptConfig): a .sops.yaml that is found is always loaded, so one that does
  // not parse, or whose creation rules match nothing, refuses even with keys on the command line.
  const fromConfig = setupFromConfig(file, values.config as string | undefined, io, deps, context);
  // sops takes each selection option from the flag, else the rule, then refuses two of them.
  if (flagRule && fromConfig?.rule && fromConfig.rule.kind !== flagRule.kind) {
    throw new BootsealError(
      "CONFLICTING_FLAGS",
      `cannot use more than one of --${flagRule.kind.replaceAll("_", "-")} and the .sops.yaml rule's ${fromConfig.rule.kind}`,
    );
  }
  const groups = flagKeys.length > 0 ? [flagKeys] : fromConfig?.groups;
  // sops's texts (cmd/sops/main.go, keygroups.go), which scripts match.
  if (!groups) {
    throw new BootsealError(
      "USAGE",
      `config file not found, or has no creation rules, and no keys provided through command line options (give ${KEY_FLAG_LIST}, or a .sops.yaml creation rule)`,
    );
  }
  if (groups.length === 0 || groups.some((g) => g.length === 0)) {
    throw new BootsealError("USAGE", "Could not generate data key: [empty key group provided]");
  }
  return {
    groups: keysThrough(groups, values),
    threshold: threshold !== undefined ? Number(threshold) : fromConfig?.threshold,
    rule: flagRule ?? fromConfig?.rule,
    macOnlyEncrypted: values["mac-only-encrypted"] === true || fromConfig?.macOnlyEncrypted === true,
    indent: fromConfig?.indent,
  };
}
