/**
 * sops's key and selection flags, shared by encrypt, rotate and updatekeys. Flag names and
 * environment variables are sops's own, so scripts move between the two tools unchanged.
 */

import { KEY_TYPES, type KeyKind } from "../../providers/keys/index.ts";
import type { SelectionRule } from "../envelope/sops/metadata.ts";
import { BootsealError } from "../errors.ts";

export interface KeyFlag {
  readonly kind: KeyKind;
  /** long flag name without dashes, as sops spells it */
  readonly flag: string;
  readonly short?: string;
  readonly env: string;
  /** One line, as `sops encrypt --help` describes the flag. */
  readonly help: string;
}

/** In the order sops puts command-line keys into the single group; each provider owns its flag. */
export const KEY_FLAGS: readonly KeyFlag[] = [...KEY_TYPES]
  .sort((a, b) => a.flag.rank - b.flag.rank)
  .map(({ kind, flag: { flag, short, env, help } }) =>
    short === undefined ? { kind, flag, env, help } : { kind, flag, short, env, help },
  );

export const RULE_FLAGS: readonly { readonly flag: string; readonly kind: SelectionRule["kind"] }[] = [
  { flag: "unencrypted-suffix", kind: "unencrypted_suffix" },
  { flag: "encrypted-suffix", kind: "encrypted_suffix" },
  { flag: "unencrypted-regex", kind: "unencrypted_regex" },
  { flag: "encrypted-regex", kind: "encrypted_regex" },
  { flag: "unencrypted-comment-regex", kind: "unencrypted_comment_regex" },
  { flag: "encrypted-comment-regex", kind: "encrypted_comment_regex" },
];

type StringOption = { type: "string"; short?: string };

/** parseArgs option declarations for the key flags (or the --add-X and --rm-X pairs of rotate). */
export function keyFlagOptions(variant: "set" | "add-rm"): Record<string, StringOption> {
  const options: Record<string, StringOption> = {};
  for (const k of KEY_FLAGS) {
    if (variant === "set")
      options[k.flag] = k.short ? { type: "string", short: k.short } : { type: "string" };
    else {
      options[`add-${k.flag}`] = { type: "string" };
      options[`rm-${k.flag}`] = { type: "string" };
    }
  }
  return options;
}

export function ruleFlagOptions(): Record<string, StringOption> {
  return Object.fromEntries(RULE_FLAGS.map((r) => [r.flag, { type: "string" } as StringOption]));
}

/** The selection rule given on the command line, if any; two of them is a usage error, as in sops. */
export function ruleFromFlags(values: Record<string, unknown>): SelectionRule | undefined {
  const given = RULE_FLAGS.filter((r) => typeof values[r.flag] === "string");
  if (given.length > 1) {
    throw new BootsealError(
      "USAGE",
      `Cannot use more than one of ${given.map((g) => `--${g.flag}`).join(", ")}`,
    );
  }
  const first = given[0];
  return first ? { kind: first.kind, value: values[first.flag] as string } : undefined;
}

/** Comma-separated key lists from flags, falling back to sops's environment variables. */
export function keyListsFromFlags(
  values: Record<string, unknown>,
  env: Readonly<Record<string, string | undefined>>,
  prefix = "",
): { kind: KeyKind; text: string }[] {
  const lists: { kind: KeyKind; text: string }[] = [];
  for (const k of KEY_FLAGS) {
    const fromFlag = values[`${prefix}${k.flag}`];
    const text = typeof fromFlag === "string" ? fromFlag : prefix === "" ? env[k.env] : undefined;
    if (text !== undefined && text.trim() !== "") lists.push({ kind: k.kind, text });
  }
  return lists;
}

/**
 * `--encryption-context k1:v1,k2:v2`. sops drops the whole context (with a warning) when a
 * pair does not split into exactly two parts; we refuse instead, because a silently missing
 * context would bind the data key to nothing.
 */
export function parseEncryptionContext(text: string | undefined): Record<string, string> | undefined {
  if (text === undefined || text.trim() === "") return undefined;
  const context: Record<string, string> = {};
  for (const pair of text.split(",")) {
    const parts = pair.split(":");
    if (parts.length !== 2 || !parts[0] || parts[1] === undefined) {
      throw new BootsealError("USAGE", `--encryption-context wants key:value pairs, got "${pair}"`);
    }
    context[parts[0]] = parts[1];
  }
  return context;
}
