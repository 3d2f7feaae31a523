/**
 * rotate FILE (sops rotate): decrypt (MAC checked), add the --add-* keys to the first group,
 * drop every key whose identity equals an --rm-* key, then a NEW data key re-encrypts every
 * value and the MAC. Keys that stay keep their created_at; version is unchanged.
 */
import { parseArgs } from "node:util";
import { resolverFor } from "../../../providers/keys/index.ts";
import type { KeyEntry, MasterKey } from "../../../providers/keys/master-key.ts";
import { decryptDocument } from "../../envelope/sops/decrypt.ts";
import { encryptDocument } from "../../envelope/sops/encrypt.ts";
import type { Metadata } from "../../envelope/sops/metadata.ts";
import { BootsealError } from "../../errors.ts";
import type { Command } from "../command.ts";
import { readInput, writeOutput } from "../file-io.ts";
import { keyFlagOptions } from "../key-flags.ts";
import { keysFromFlags, masterKeyFromEntry } from "../key-setup.ts";
import {
  emitEncrypted,
  FORMAT_OPTIONS,
  loadEncrypted,
  parseDecryptionOrder,
  pickFormats,
  providerDeps,
} from "../sops-file.ts";

/** Entries of the new metadata get back the created_at of the key they replace. */
function keepCreatedAt(
  metadata: Metadata,
  groups: readonly (readonly MasterKey[])[],
  old: Map<string, KeyEntry>,
): Metadata {
  const keyGroups = metadata.keyGroups.map((group, g) =>
    group.map((entry, i) => {
      const previous = old.get(groups[g]?.[i]?.id ?? "");
      const createdAt = previous?.fields.get("created_at");
      if (createdAt === undefined || !entry.fields.has("created_at")) return entry;
      const fields = new Map(entry.fields);
      fields.set("created_at", createdAt);
      return { ...entry, fields };
    }),
  );
  return { ...metadata, keyGroups };
}

export const rotateCommand: Command = {
  name: "rotate",
  summary: "give a document a new data key, optionally adding or removing master keys",
  usage: "bootseal rotate [--add-age R] [--rm-pgp FP] [--add-kms ARN] ... [-i | --output FILE] FILE",
  async run(args, io) {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        ...keyFlagOptions("add-rm"),
        ...FORMAT_OPTIONS,
        "encryption-context": { type: "string" },
        "aws-profile": { type: "string" },
        "ignore-mac": { type: "boolean" },
        "decryption-order": { type: "string" },
        output: { type: "string" },
        "in-place": { type: "boolean", short: "i" },
      },
    });
    if (positionals.length !== 1) throw new BootsealError("USAGE", "rotate takes one file");
    const file = positionals[0] as string;
    const deps = providerDeps(io.env);
    const formats = pickFormats(file, values);
    const doc = loadEncrypted(await readInput(file, io), formats.input);

    const plain = await decryptDocument(doc.branches, doc.metadata, {
      resolve: resolverFor(deps),
      order: parseDecryptionOrder(values["decryption-order"] ?? io.env.SOPS_DECRYPTION_ORDER),
      ignoreMac: values["ignore-mac"] === true,
    });

    const old = new Map<string, KeyEntry>();
    const groups = doc.metadata.keyGroups.map((group) =>
      group.map((entry) => {
        const key = masterKeyFromEntry(entry, deps);
        old.set(key.id, entry);
        return key;
      }),
    );
    for (const key of keysFromFlags(values, deps, io.env, "add-")) {
      if (!groups.some((g) => g.some((k) => k.id === key.id))) groups[0]?.push(key);
    }
    const removed = new Set(keysFromFlags(values, deps, io.env, "rm-").map((k) => k.id));
    const remaining = groups.map((g) => g.filter((k) => !removed.has(k.id)));
    if (remaining.some((g) => g.length === 0)) {
      throw new BootsealError("USAGE", "rotate would leave a key group empty");
    }

    const encrypted = await encryptDocument(plain, {
      keyGroups: remaining,
      threshold: doc.metadata.shamirThreshold,
      rule: doc.metadata.rule,
      macOnlyEncrypted: doc.metadata.macOnlyEncrypted,
      version: doc.metadata.version,
    });
    const metadata = keepCreatedAt(encrypted.metadata, remaining, old);
    const out = emitEncrypted(formats.output, encrypted.branches, metadata);
    await writeOutput(out, { inPlace: values["in-place"], output: values.output, inputFile: file }, io);
    return 0;
  },
};
