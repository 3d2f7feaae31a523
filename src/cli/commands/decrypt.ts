import { parseArgs } from "node:util";
import type { ProviderDeps } from "../../../providers/keys/index.ts";
import { KEY_KINDS, keysFromUserInput, resolverFor } from "../../../providers/keys/index.ts";
import { decryptConfig } from "../../envelope/encrypted-config/encrypted-config.ts";
import { codecFor } from "../../envelope/sops/codecs/index.ts";
import { decryptDocument } from "../../envelope/sops/decrypt.ts";
import { BootsealError } from "../../errors.ts";
import type { Command } from "../command.ts";
import { extractPath, renderExtracted } from "../extract.ts";
import { readInput, writeOutput } from "../file-io.ts";
import {
  emitOptions,
  FORMAT_OPTIONS,
  loadEncrypted,
  parseDecryptionOrder,
  pickFormats,
  providerDeps,
} from "../sops-file.ts";

/** An EncryptedConfig is a JSON object whose kind says so; a SOPS document never does. */
function isEncryptedConfig(bytes: Uint8Array): boolean {
  const head = new TextDecoder().decode(bytes.subarray(0, 4096));
  return /^\s*\{/.test(head) && /"kind"\s*:\s*"EncryptedConfig"/.test(head);
}

function envelopeResolver(deps: ProviderDeps) {
  return (kind: string, keyId: string) => {
    try {
      return keysFromUserInput(kind, keyId, deps)[0] ?? null;
    } catch {
      return null;
    }
  };
}

export const decryptCommand: Command = {
  name: "decrypt",
  summary: "decrypt a SOPS v3 document (or an EncryptedConfig) after verifying its MAC",
  usage:
    "bootseal decrypt [--extract '[\"key\"][0]'] [--ignore-mac] [--decryption-order age,pgp,...] [--machine NS/NAME]\n" +
    "                 [--input-type T] [--output-type T] [-i | --output FILE] [FILE]",
  async run(args, io) {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        ...FORMAT_OPTIONS,
        extract: { type: "string" },
        "ignore-mac": { type: "boolean" },
        "decryption-order": { type: "string" },
        machine: { type: "string" },
        output: { type: "string" },
        "in-place": { type: "boolean", short: "i" },
      },
    });
    if (positionals.length > 1) throw new BootsealError("USAGE", "decrypt takes one file");
    const file = positionals[0];
    const deps = providerDeps(io.env);
    const input = await readInput(file, io);
    const target = { inPlace: values["in-place"], output: values.output, inputFile: file };

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
    const doc = loadEncrypted(input, formats.input);
    if (values["ignore-mac"])
      io.stderr.write("bootseal: WARNING: --ignore-mac: the MAC is not checked, the output may be forged\n");
    const branches = await decryptDocument(doc.branches, doc.metadata, {
      resolve: resolverFor(deps),
      order: parseDecryptionOrder(values["decryption-order"] ?? io.env.SOPS_DECRYPTION_ORDER),
      ignoreMac: values["ignore-mac"] === true,
    });
    const out =
      values.extract !== undefined
        ? renderExtracted(extractPath(branches, values.extract), formats.output)
        : codecFor(formats.output).emitPlain(branches, emitOptions(values.indent));
    await writeOutput(out, target, io);
    return 0;
  },
};
