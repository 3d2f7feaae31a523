/**
 * Flags several commands share, declared once. Wording follows `sops <command> --help`
 * where sops has the flag. The key and selection flags, and those naming key kinds, are in
 * ./key-flags.ts: they load the key registry, and `status`, `publish`, `userdata` must not.
 */
import type { Flag } from "./flags.ts";

const FORMAT_LIST = "yaml, json, dotenv, ini or binary";

export const INPUT_TYPE_FLAG = {
  name: "input-type",
  type: "string",
  value: "TYPE",
  help: `${FORMAT_LIST}; if not set, the file's extension decides`,
} as const satisfies Flag;

export const OUTPUT_TYPE_FLAG = {
  name: "output-type",
  type: "string",
  value: "TYPE",
  help: `${FORMAT_LIST}; if not set, the input's type or extension decides`,
} as const satisfies Flag;

/** The sops document flags of decrypt, encrypt and rotate FILE. */
export const FORMAT_FLAGS = [
  INPUT_TYPE_FLAG,
  OUTPUT_TYPE_FLAG,
  {
    name: "filename-override",
    type: "string",
    value: "NAME",
    help: "use this file name instead of FILE to find the .sops.yaml rule and the types (for standard input)",
  },
  { name: "indent", type: "string", value: "N", help: "indent the output by N spaces (0 to 16)" },
] as const satisfies readonly Flag[];

/** Where a sops-style command writes its result (standard output by default). */
export const OUTPUT_FLAGS = [
  {
    name: "in-place",
    short: "i",
    type: "boolean",
    help: "write output back to the same file instead of standard output",
  },
  { name: "output", type: "string", value: "FILE", help: "write the output to this file" },
] as const satisfies readonly Flag[];

export const SOPS_CONFIG_FLAG = {
  name: "config",
  type: "string",
  env: "SOPS_CONFIG",
  value: "FILE",
  help: "the .sops.yaml to use instead of searching from the working directory upwards",
} as const satisfies Flag;

export const THRESHOLD_FLAG = {
  name: "shamir-secret-sharing-threshold",
  type: "string",
  value: "N",
  help: "the number of key groups needed to recover the data key (Shamir)",
} as const satisfies Flag;

export const IGNORE_MAC_FLAG = {
  name: "ignore-mac",
  type: "boolean",
  help: "ignore the Message Authentication Code during decryption (recovery only)",
} as const satisfies Flag;

/** encrypt, decrypt, rotate, updatekeys, edit: where data keys are wrapped and unwrapped (sops's flags). */
export const KEYSERVICE_FLAGS = [
  {
    name: "enable-local-keyservice",
    type: "boolean",
    env: "SOPS_ENABLE_LOCAL_KEYSERVICE",
    default: "true",
    help: "use local key service (--enable-local-keyservice=false: only the --keyservice ones)",
  },
  {
    name: "keyservice",
    type: "string",
    multiple: true,
    env: "SOPS_KEYSERVICE",
    value: "URI",
    help: "Specify the key services to use in addition to the local one. Syntax: protocol://address. Example: tcp://myserver.com:5000",
  },
] as const satisfies readonly Flag[];

/** fetch and the controller clients: a private CA for an https service. */
export const CA_FILE_FLAG = {
  name: "ca-file",
  type: "string",
  value: "FILE",
  help: "extra CA certificates (PEM) for an https service",
} as const satisfies Flag;

/** `--deadline`'s default for the controller clients: one request, all retries included. */
export const DEFAULT_CLIENT_DEADLINE = "30s";

/** publish, status, userdata: how to reach the service and who we are. */
export const CLIENT_FLAGS = [
  {
    name: "server",
    type: "string",
    env: "BOOTSEAL_SERVER",
    value: "URL",
    required: true,
    help: "the bootseal service's base URL (http or https)",
  },
  {
    name: "token-file",
    type: "string",
    value: "FILE",
    help: "file holding the controller token (not readable by group or others); else $BOOTSEAL_TOKEN",
  },
  CA_FILE_FLAG,
  {
    name: "deadline",
    type: "string",
    value: "DUR",
    default: DEFAULT_CLIENT_DEADLINE,
    help: "give up after DUR, all retries included (500ms, 2s, 1m)",
  },
] as const satisfies readonly Flag[];

/**
 * fetch, publish, status, rotate --store: the result as JSON on standard output (one object,
 * or JSON lines), and a failure as one `{"error":{"code","message"}}` line on standard error
 * (main.ts), with the same exit code as without the flag.
 */
export const JSON_FLAG = {
  name: "json",
  type: "boolean",
  help: "machine-readable output: JSON on standard output, an error as a JSON line on standard error",
} as const satisfies Flag;
