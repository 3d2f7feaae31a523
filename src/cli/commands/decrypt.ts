import type { ProviderDeps } from "../../../providers/keys/index.ts";
import { KEY_KINDS, keysFromUserInput } from "../../../providers/keys/index.ts";
import { isEncryptedConfig, loadEncrypted } from "../../envelope/document.ts";
import { decryptConfig } from "../../envelope/encrypted-config/encrypted-config.ts";
import { codecFor } from "../../envelope/sops/codecs/index.ts";
import { decryptDocument } from "../../envelope/sops/decrypt.ts";
import { BootsealError } from "../../errors.ts";
import type { Command } from "../command.ts";
import { dumping } from "../dump-error.ts";
import { extractPath, parseExtractPath, renderExtracted } from "../extract.ts";
import { checkTarget, readInput, requireExisting, writeOutput } from "../file-io.ts";
import { FORMAT_FLAGS, KEYSERVICE_FLAGS, OUTPUT_FLAGS } from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { DECRYPTION_ORDER_FLAG } from "../key-flags.ts";
import { keyResolver } from "../key-setup.ts";
import { emitOptions, parseDecryptionOrder, pickFormats, providerDeps } from "../sops-file.ts";

function envelopeResolver(deps: ProviderDeps) {
  return (kind: string, keyId: string) => {
    try {
      return keysFromUserInput(kind, keyId, deps)[0] ?? null;
    } catch {
      return null;
    }
  };
}

const spec = {
  name: "decrypt",
  summary: "decrypt a SOPS v3 document (or an EncryptedConfig) after verifying its MAC or tag",
  operands: "[FILE]",
  flags: [
    ...OUTPUT_FLAGS,
    {
      name: "extract",
      type: "string",
      value: "PATH",
      help: `print only this key or branch of the document, e.g. '["somekey"][0]'`,
    },
    ...FORMAT_FLAGS,
    {
      name: "ignore-mac",
      type: "boolean",
      help: "do not check the MAC (recovery only: the output may be forged)",
    },
    DECRYPTION_ORDER_FLAG,
    ...KEYSERVICE_FLAGS,
    {
      name: "machine",
      type: "string",
      value: "NS/NAME",
      help: "the machine an EncryptedConfig must be bound to",
    },
  ],
  notes: ["FILE: a file name, or - or nothing for standard input (then give --input-type)."],
} as const satisfies CommandSpec;

export const decryptCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    if (positionals.length > 1) throw new BootsealError("USAGE", "decrypt takes one file");
    const file = positionals[0];
    const target = { inPlace: values["in-place"], output: values.output, inputFile: file };
    checkTarget(target);
    await requireExisting(file, io);
    // sops parses the order and the path before it reads anything (exit 112, 91 even without
    // a key). An empty path extracts nothing, as in sops.
    const order = parseDecryptionOrder(values["decryption-order"]);
    const extract = values.extract === "" ? undefined : values.extract;
    if (extract !== undefined) parseExtractPath(extract);
    const deps = providerDeps(io.env);
    const input = await readInput(file, io);

    if (isEncryptedConfig(input)) {
      const plaintext = await decryptConfig(input, {
        kinds: KEY_KINDS,
        resolve: envelopeResolver(deps),
        machineId: values.machine,
      });
      await writeOutput(plaintext, target, io);
      return 0;
    }

    const formats = pickFormats(file, values);
    const doc = loadEncrypted(input, formats.input, KEY_KINDS);
    if (values["ignore-mac"])
      io.stderr.write("bootseal: WARNING: --ignore-mac: the MAC is not checked, the output may be forged\n");
    const branches = await decryptDocument(doc.branches, doc.metadata, {
      resolve: keyResolver(values, deps),
      order,
      ignoreMac: values["ignore-mac"] === true,
    });
    const out =
      extract !== undefined
        ? dumping("Error dumping tree", () => renderExtracted(extractPath(branches, extract), formats.output))
        : dumping("Error dumping file", () =>
            codecFor(formats.output).emitPlain(branches, emitOptions(values.indent)),
          );
    await writeOutput(out, target, io);
    return 0;
  },
};
