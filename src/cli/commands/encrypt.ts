import { parseArgs } from "node:util";
import { KEY_KINDS } from "../../../providers/keys/index.ts";
import { encryptConfig } from "../../envelope/encrypted-config/encrypted-config.ts";
import { codecFor } from "../../envelope/sops/codecs/index.ts";
import { encryptDocument } from "../../envelope/sops/encrypt.ts";
import { BootsealError } from "../../errors.ts";
import type { Command } from "../command.ts";
import { readInput, writeOutput } from "../file-io.ts";
import { keyFlagOptions, ruleFlagOptions } from "../key-flags.ts";
import { keySetup } from "../key-setup.ts";
import { emitEncrypted, emitOptions, FORMAT_OPTIONS, pickFormats, providerDeps } from "../sops-file.ts";

export const encryptCommand: Command = {
  name: "encrypt",
  summary: "encrypt a file as a SOPS v3 document (or an EncryptedConfig with --format envelope)",
  usage:
    "bootseal encrypt [--age R] [--pgp FP] [--kms ARN] [--gcp-kms ID] [--azure-kv URL] [--hc-vault-transit URI]\n" +
    "                 [--encryption-context k:v,...] [--unencrypted-suffix S | --encrypted-regex RE | ...]\n" +
    "                 [--shamir-secret-sharing-threshold N] [--mac-only-encrypted] [--format sops|envelope]\n" +
    "                 [--machine NS/NAME] [--input-type T] [--output-type T] [-i | --output FILE] [FILE]",
  async run(args, io) {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        ...keyFlagOptions("set"),
        ...ruleFlagOptions(),
        ...FORMAT_OPTIONS,
        "encryption-context": { type: "string" },
        "aws-profile": { type: "string" },
        "shamir-secret-sharing-threshold": { type: "string" },
        "mac-only-encrypted": { type: "boolean" },
        format: { type: "string" },
        machine: { type: "string" },
        config: { type: "string" },
        output: { type: "string" },
        "in-place": { type: "boolean", short: "i" },
      },
    });
    if (positionals.length > 1) throw new BootsealError("USAGE", "encrypt takes one file");
    const file = positionals[0];
    const format = values.format ?? "sops";
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
    });
    const indent = values.indent ?? indentFromConfig(formats.output, setup.indent);
    const out = emitEncrypted(formats.output, encrypted.branches, encrypted.metadata, emitOptions(indent));
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
