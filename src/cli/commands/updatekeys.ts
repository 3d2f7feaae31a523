/**
 * updatekeys FILE (sops updatekeys): re-wrap the SAME data key for the key groups the
 * .sops.yaml creation rule now gives. Values, MAC, lastmodified and version are untouched;
 * the MAC is not verified (as in sops), the file is rewritten in place.
 */
import { createInterface } from "node:readline/promises";
import { KEY_KINDS } from "../../../providers/keys/index.ts";
import { emitEncrypted, loadEncrypted } from "../../envelope/document.ts";
import { unwrapDataKey, wrapDataKey } from "../../envelope/sops/key-groups.ts";
import { BootsealError } from "../../errors.ts";
import { replaceFile } from "../../files/atomic-write.ts";
import type { Command } from "../command.ts";
import { readInput } from "../file-io.ts";
import {
  DECRYPTION_ORDER_FLAG,
  INPUT_TYPE_FLAG,
  KEYSERVICE_FLAGS,
  SOPS_CONFIG_FLAG,
  THRESHOLD_FLAG,
} from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { keyResolver, keysThrough, masterKeyFromEntry, setupFromConfig } from "../key-setup.ts";
import { parseDecryptionOrder, pickFormats, providerDeps } from "../sops-file.ts";

const spec = {
  name: "updatekeys",
  summary: "re-wrap a document's data key for the keys its .sops.yaml rule now lists",
  operands: "FILE",
  flags: [
    { name: "yes", short: "y", type: "boolean", help: "pre-approve all changes and run non-interactively" },
    THRESHOLD_FLAG,
    SOPS_CONFIG_FLAG,
    INPUT_TYPE_FLAG,
    DECRYPTION_ORDER_FLAG,
    ...KEYSERVICE_FLAGS,
  ],
} as const satisfies CommandSpec;

export const updatekeysCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    if (positionals.length !== 1) throw new BootsealError("USAGE", "updatekeys takes one file");
    const file = positionals[0] as string;
    const deps = providerDeps(io.env);
    const formats = pickFormats(file, {
      "input-type": values["input-type"],
      "output-type": values["input-type"],
    });
    const doc = loadEncrypted(await readInput(file, io), formats.input, KEY_KINDS);
    const setup = setupFromConfig(file, values.config, io, deps);
    if (!setup) throw new BootsealError("USAGE", "updatekeys needs a .sops.yaml creation rule for the file");

    const current = doc.metadata.keyGroups.map((g) => g.map((e) => masterKeyFromEntry(e, deps).id));
    const wanted = setup.groups.map((g) => g.map((k) => k.id));
    const flagThreshold = values["shamir-secret-sharing-threshold"];
    const threshold = Math.min(
      flagThreshold !== undefined ? Number(flagThreshold) : (doc.metadata.shamirThreshold ?? 0),
      setup.groups.length,
    );
    const same =
      JSON.stringify(current) === JSON.stringify(wanted) &&
      (setup.groups.length < 2 || threshold === (doc.metadata.shamirThreshold ?? 0));
    if (same) {
      io.stderr.write(`${file} already up to date\n`);
      return 0;
    }
    for (const [g, ids] of wanted.entries()) {
      const before = new Set(current[g] ?? []);
      const after = new Set(ids);
      for (const id of ids) if (!before.has(id)) io.stderr.write(`group ${g}: +++ ${id}\n`);
      for (const id of before) if (!after.has(id)) io.stderr.write(`group ${g}: --- ${id}\n`);
    }
    if (!values.yes) {
      if (!(io.stdin as NodeJS.ReadStream).isTTY)
        throw new BootsealError("USAGE", "updatekeys needs --yes when not run on a terminal");
      const rl = createInterface({ input: io.stdin, output: io.stderr });
      const answer = await rl.question("Is this okay? (y/n): ");
      rl.close();
      if (answer.trim().toLowerCase() !== "y") return 0;
    }

    const dataKey = await unwrapDataKey(doc.metadata.keyGroups, keyResolver(values, deps), {
      threshold: doc.metadata.shamirThreshold,
      order: parseDecryptionOrder(values["decryption-order"]),
    });
    try {
      const keyGroups = await wrapDataKey(dataKey, keysThrough(setup.groups, values), { threshold });
      const metadata = {
        ...doc.metadata,
        keyGroups,
        shamirThreshold:
          setup.groups.length > 1 ? threshold || setup.groups.length : doc.metadata.shamirThreshold,
      };
      await replaceFile(file, emitEncrypted(formats.input, doc.branches, metadata, KEY_KINDS));
    } finally {
      dataKey.fill(0);
    }
    io.stderr.write(`${file} updated\n`);
    return 0;
  },
};
