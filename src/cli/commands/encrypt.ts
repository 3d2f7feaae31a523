import { KEY_KINDS } from "../../../providers/keys/index.ts";
import { emitEncrypted } from "../../envelope/document.ts";
import { encryptConfig } from "../../envelope/encrypted-config/encrypted-config.ts";
import type { Format } from "../../envelope/sops/codecs/codec.ts";
import { codecFor } from "../../envelope/sops/codecs/index.ts";
import type { Branch } from "../../envelope/sops/document.ts";
import { encryptDocument } from "../../envelope/sops/encrypt.ts";
import { BootsealError, hasCode } from "../../errors.ts";
import type { Command } from "../command.ts";
import { dumping } from "../dump-error.ts";
import { checkTarget, isStdin, readInput, requireExisting, writeOutput } from "../file-io.ts";
import {
  FORMAT_FLAGS,
  KEYSERVICE_FLAGS,
  OUTPUT_FLAGS,
  SOPS_CONFIG_FLAG,
  THRESHOLD_FLAG,
} from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { KMS_FLAGS, keyFlags, ruleFlags } from "../key-flags.ts";
import { keySetup } from "../key-setup.ts";
import { emitOptions, pickFormats, providerDeps } from "../sops-file.ts";

const spec = {
  name: "encrypt",
  summary: "encrypt a file as a SOPS v3 document (or an EncryptedConfig with --format envelope)",
  operands: "[FILE]",
  flags: [
    ...OUTPUT_FLAGS,
    ...keyFlags("set"),
    ...KMS_FLAGS,
    ...FORMAT_FLAGS,
    ...ruleFlags(),
    { name: "mac-only-encrypted", type: "boolean", help: "compute the MAC over the encrypted values only" },
    THRESHOLD_FLAG,
    SOPS_CONFIG_FLAG,
    ...KEYSERVICE_FLAGS,
    {
      name: "format",
      type: "string",
      value: "sops|envelope",
      default: "sops",
      help: "a SOPS v3 document, or an EncryptedConfig (exactly one master key)",
    },
    {
      name: "machine",
      type: "string",
      value: "NS/NAME",
      help: "bind an EncryptedConfig to this machine",
    },
  ],
  notes: [
    "Keys given with flags (or their variables) form one key group; without any, the first matching",
    ".sops.yaml creation rule gives the keys. At most one selection flag (--unencrypted-suffix, ...).",
    "FILE: a file name, or - or nothing for standard input (then give --input-type).",
  ],
} as const satisfies CommandSpec;

export const encryptCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    if (positionals.length > 1) throw new BootsealError("USAGE", "encrypt takes one file");
    const file = positionals[0];
    const format = values.format;
    if (format !== "sops" && format !== "envelope") {
      throw new BootsealError("USAGE", `--format must be sops or envelope, got "${format}"`);
    }
    const target = { inPlace: values["in-place"], output: values.output, inputFile: file };
    // sops's order: the flags, the file's existence, the keys, then the input.
    checkTarget(target);
    const untyped = values["filename-override"] === undefined && values["input-type"] === undefined;
    if (format === "sops" && isStdin(file) && untyped) {
      throw new BootsealError(
        "CONFLICTING_FLAGS",
        "must specify --filename-override (or --input-type) when reading from stdin",
      );
    }
    await requireExisting(file, io);
    const deps = providerDeps(io.env);
    const setup = keySetup(values["filename-override"] ?? file ?? "-", values, io, deps);
    const input = await readInput(file, io);

    if (format === "envelope") {
      const keys = setup.groups.flat();
      if (keys.length !== 1 || setup.groups.length !== 1) {
        throw new BootsealError("USAGE", "--format envelope wraps the data key with exactly one master key");
      }
      const doc = await encryptConfig(input, {
        kinds: KEY_KINDS,
        key: keys[0] as (typeof keys)[number],
        machineId: values.machine,
      });
      await writeOutput(new TextEncoder().encode(doc), target, io);
      return 0;
    }

    const formats = pickFormats(file, values);
    const branches = parsePlaintext(formats.input, input);
    const encrypted = await encryptDocument(branches, {
      keyGroups: setup.groups,
      threshold: setup.threshold,
      rule: setup.rule,
      macOnlyEncrypted: setup.macOnlyEncrypted,
      singleValue: codecFor(formats.input).singleValue,
    });
    const indent = values.indent ?? indentFromConfig(formats.output, setup.indent);
    const out = dumping("Could not marshal tree", () =>
      emitEncrypted(formats.output, encrypted.branches, encrypted.metadata, KEY_KINDS, emitOptions(indent)),
    );
    await writeOutput(out, target, io);
    return 0;
  },
};

/**
 * The plaintext's documents, refused as sops refuses them: unparseable input is "Error
 * unmarshalling file" (READ_FAILED, exit 2); no document at all is EMPTY_DOCUMENT (92) for an
 * empty file, and sops's YAML decoder reports a non-empty file with no document (only
 * comments or blank lines) as an unmarshalling error ("EOF"). Nothing is written either way.
 */
function parsePlaintext(format: Format, input: Uint8Array): Branch[] {
  let branches: Branch[];
  try {
    branches = codecFor(format).parsePlain(input);
  } catch (err) {
    if (!hasCode(err, "BAD_INPUT")) throw err;
    throw new BootsealError("READ_FAILED", `Error unmarshalling file: ${err.message}`, { cause: err });
  }
  if (branches.length === 0) {
    if (input.length === 0) {
      throw new BootsealError(
        "EMPTY_DOCUMENT",
        "File cannot be completely empty, it must contain at least one document",
      );
    }
    throw new BootsealError("READ_FAILED", "Error unmarshalling file: EOF");
  }
  return branches;
}

export function indentFromConfig(
  format: string,
  indent: { yaml?: number; json?: number; binary?: number } | undefined,
): string | undefined {
  const n =
    format === "yaml"
      ? indent?.yaml
      : format === "json"
        ? indent?.json
        : format === "binary"
          ? indent?.binary
          : undefined;
  return n === undefined ? undefined : String(n);
}
