/**
 * sops's key and selection flags, shared by encrypt, rotate and updatekeys, and the flags
 * that name key kinds (from the key registry). Flag names and environment variables are
 * sops's own, so scripts move between the two tools unchanged.
 */

import { KEY_KIND_NAMES, KEY_TYPES, type KeyKind } from "../../providers/keys/index.ts";
import type { SelectionRule } from "../envelope/sops/metadata.ts";
import { BootsealError } from "../errors.ts";
import {
  IGNORE_MAC_FLAG,
  INPUT_TYPE_FLAG,
  KEYSERVICE_FLAGS,
  OUTPUT_TYPE_FLAG,
  THRESHOLD_FLAG,
} from "./flag-groups.ts";
import type { Flag } from "./flags.ts";

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

/**
 * The key flags as table rows: `set` for encrypt (with sops's environment variables),
 * `add`/`rm` for rotate's --add-X and --rm-X (no environment: a variable must never change
 * the keys of an existing document behind the operator's back).
 */
export function keyFlags(variant: "set" | "add" | "rm"): Flag[] {
  return KEY_FLAGS.map((k): Flag => {
    if (variant === "set")
      return { name: k.flag, short: k.short, type: "string", env: k.env, value: "KEYS", help: k.help };
    const help =
      variant === "add"
        ? `add to the document's first key group: ${k.help}`
        : `remove from every key group (by key identity): ${k.help}`;
    return { name: `${variant}-${k.flag}`, type: "string", value: "KEYS", help };
  });
}

/** Wording after `sops encrypt --help`. */
const RULE_HELP: Record<SelectionRule["kind"], string> = {
  unencrypted_suffix: "leave keys ending in this suffix unencrypted",
  encrypted_suffix: "encrypt only the keys ending in this suffix",
  unencrypted_regex: "leave the keys matching this regular expression unencrypted",
  encrypted_regex: "encrypt only the keys matching this regular expression",
  unencrypted_comment_regex:
    "leave values unencrypted whose preceding comment matches this regular expression",
  encrypted_comment_regex: "encrypt only values whose preceding comment matches this regular expression",
};

/** At most one of these may be given (ruleFromFlags). */
export function ruleFlags(): Flag[] {
  return RULE_FLAGS.map((r) => ({ name: r.flag, type: "string", value: "TEXT", help: RULE_HELP[r.kind] }));
}

/** How AWS KMS keys given on the command line are used (encrypt; rotate's --add-kms). */
export const KMS_FLAGS = [
  {
    name: "encryption-context",
    type: "string",
    value: "K:V,...",
    help: "comma separated list of KMS encryption context key:value pairs",
  },
  { name: "aws-profile", type: "string", value: "NAME", help: "the AWS profile to use for requests to AWS" },
] as const satisfies readonly Flag[];

/** The kinds in the registry's order (age, pgp, kms, gcp_kms, azure_kv, hc_vault). */
export const DECRYPTION_ORDER_FLAG = {
  name: "decryption-order",
  type: "string",
  env: "SOPS_DECRYPTION_ORDER",
  value: "KINDS",
  help: `comma separated list of key kinds to try first (${KEY_KIND_NAMES.join(", ")})`,
} as const satisfies Flag;

/**
 * set and unset (sops's flags): the document's types, how to open it. The threshold is
 * accepted and ignored, as in sops: the key groups of an edited document do not change.
 */
export const TREE_EDIT_FLAGS = [
  INPUT_TYPE_FLAG,
  OUTPUT_TYPE_FLAG,
  { ...THRESHOLD_FLAG, help: "accepted for sops compatibility; the document's key groups are kept" },
  IGNORE_MAC_FLAG,
  DECRYPTION_ORDER_FLAG,
  ...KEYSERVICE_FLAGS,
] as const satisfies readonly Flag[];

/** The selection rule given on the command line, if any; two of them conflict, as in sops (exit 8). */
export function ruleFromFlags(values: Record<string, unknown>): SelectionRule | undefined {
  const given = RULE_FLAGS.filter((r) => typeof values[r.flag] === "string");
  if (given.length > 1) {
    throw new BootsealError(
      "CONFLICTING_FLAGS",
      `Cannot use more than one of ${given.map((g) => `--${g.flag}`).join(", ")}`,
    );
  }
  const first = given[0];
  return first ? { kind: first.kind, value: values[first.flag] as string } : undefined;
}

/**
 * Comma-separated key lists from parsed flags. sops's environment variables (SOPS_AGE_RECIPIENTS,
 * ...) are the `env` of the encrypt flags, so parseFlags has already put them into `values`;
 * `_env` stays for the callers' signature.
 */
export function keyListsFromFlags(
  values: Record<string, unknown>,
  _env: Readonly<Record<string, string | undefined>>,
  prefix = "",
): { kind: KeyKind; text: string }[] {
  const lists: { kind: KeyKind; text: string }[] = [];
  for (const k of KEY_FLAGS) {
    const text = values[`${prefix}${k.flag}`];
    if (typeof text === "string" && text.trim() !== "") lists.push({ kind: k.kind, text });
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
      throw new BootsealError(
        "BAD_ENCRYPTION_CONTEXT",
        `--encryption-context wants key:value pairs, got "${pair}"`,
      );
    }
    context[parts[0]] = parts[1];
  }
  return context;
}
