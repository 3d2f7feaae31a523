import { KEY_KINDS } from "../../../providers/keys/index.ts";
import { emitEncrypted } from "../../envelope/document.ts";
import { encryptConfig } from "../../envelope/encrypted-config/encrypted-config.ts";
import { codecFor } from "../../envelope/sops/codecs/index.ts";
import { encryptDocument } from "../../envelope/sops/encrypt.ts";
import { BootsealError } from "../../errors.ts";
import type { Command } from "../command.ts";
import { readInput, writeOutput } from "../file-io.ts";
import { FORMAT_FLAGS, OUTPUT_FLAGS, SOPS_CONFIG_FLAG, THRESHOLD_FLAG } from "../flag-groups.ts";
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
    const deps = providerDeps(io.env);
    const input = await readInput(file, io);
    const setup = keySetup(values["filename-override"] ?? file ?? "-", values, io, deps);
    const target = { inPlace: values["in-place"], output: values.output, inputFile: file };

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
    const branches = codecFor(formats.input).parsePlain(input);
    const encrypted = await encryptDocument(branches, {
      keyGroups: setup.groups,
      threshold: setup.threshold,
      rule: setup.rule,
      macOnlyEncrypted: setup.macOnlyEncrypted,
      singleValue: codecFor(formats.input).singleValue,
    });
    const indent = values.indent ?? indentFromConfig(formats.output, setup.indent);
    const out = emitEncrypted(
      formats.output,
      encrypted.branches,
      encrypted.metadata,
      KEY_KINDS,
      emitOptions(indent),
    );
    await writeOutput(out, target, io);
    return 0;
  },
};

function indentFromConfig(
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
