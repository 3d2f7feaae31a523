/**
 * groups add|delete (sops groups): add a key group made of the given keys, or delete the
 * group at INDEX (0-based, as sops counts here), then wrap the SAME data key again for every
 * group (Shamir shares anew when there are several). Values, MAC and lastmodified stay; keys
 * that stay keep their created_at. The result goes to standard output, or back to --file
 * with -i, as in sops.
 */
import { KEY_KINDS } from "../../../providers/keys/index.ts";
import { emitEncrypted, loadEncrypted } from "../../envelope/document.ts";
import { unwrapDataKey, wrapDataKey } from "../../envelope/sops/key-groups.ts";
import type { KeyEntry, MasterKey } from "../../envelope/sops/master-key.ts";
import type { Metadata } from "../../envelope/sops/metadata.ts";
import { BootsealError } from "../../errors.ts";
import type { CliIo, Command } from "../command.ts";
import { readInput, writeOutput } from "../file-io.ts";
import { KEYSERVICE_FLAGS, THRESHOLD_FLAG } from "../flag-groups.ts";
import { type CommandSpec, type Flag, parseFlags } from "../flags.ts";
import { KEY_FLAGS } from "../key-flags.ts";
import { keyResolver, keysFromFlags, masterKeyFromEntry } from "../key-setup.ts";
import { keepCreatedAt } from "../rotate-document.ts";
import { pickFormats, providerDeps } from "../sops-file.ts";
import { verbose } from "../verbose.ts";

/** groups add's key flags: repeatable, no short names and no environment, as in sops. */
const GROUP_KEY_FLAGS: Flag[] = KEY_FLAGS.map((k) => ({
  name: k.flag,
  type: "string",
  multiple: true,
  value: "KEYS",
  help: `add: a key of the new group: ${k.help}`,
}));

const spec = {
  name: "groups",
  summary: "add a key group to a SOPS file, or delete one by its index",
  tail: "add|delete",
  forms: ["add --file FILE [-i] --age R [--pgp FP ...]", "delete --file FILE [-i] INDEX"],
  operands: "add|delete [INDEX]",
  flags: [
    { name: "file", short: "f", type: "string", value: "FILE", help: "the SOPS file whose groups change" },
    {
      name: "in-place",
      short: "i",
      type: "boolean",
      help: "write output back to the same file instead of standard output",
    },
    ...GROUP_KEY_FLAGS,
    ...KEYSERVICE_FLAGS,
    {
      name: "aws-profile",
      type: "string",
      value: "NAME",
      help: "add: the AWS profile to use for requests to AWS",
    },
    {
      name: "encryption-context",
      type: "string",
      value: "K:V,...",
      help: "add: comma separated list of KMS encryption context key:value pairs",
    },
    THRESHOLD_FLAG,
  ],
  notes: ["INDEX counts from 0 (the first group is 0)."],
} as const satisfies CommandSpec;

type Values = Record<string, unknown>;

function thresholdFlag(values: Values): number {
  const text = values["shamir-secret-sharing-threshold"];
  if (text === undefined) return 0;
  const n = Number(text);
  if (!/^\d+$/.test(String(text)) || !Number.isSafeInteger(n)) {
    throw new BootsealError("USAGE", "--shamir-secret-sharing-threshold wants a whole number");
  }
  return n;
}

async function rewrap(
  file: string,
  values: Values,
  io: CliIo,
  change: (groups: MasterKey[][]) => MasterKey[][],
) {
  const deps = providerDeps(io.env);
  const formats = pickFormats(file, {});
  const doc = loadEncrypted(await readInput(file, io), formats.input, KEY_KINDS);
  const dataKey = await unwrapDataKey(doc.metadata.keyGroups, keyResolver(values, deps), {
    threshold: doc.metadata.shamirThreshold,
  });
  verbose(io, "Data key recovered successfully");
  try {
    const old = new Map<string, KeyEntry>();
    const current = doc.metadata.keyGroups.map((g) =>
      g.map((entry) => {
        const key = masterKeyFromEntry(entry, deps);
        old.set(key.id, entry);
        return key;
      }),
    );
    const groups = change(current);
    const flag = thresholdFlag(values);
    let threshold = flag !== 0 ? flag : (doc.metadata.shamirThreshold ?? 0);
    if (groups.length < threshold) {
      throw new BootsealError(
        "USAGE",
        `removing this key group will make the Shamir threshold impossible to satisfy: Shamir threshold is ${threshold}, but we only have ${groups.length} key groups`,
      );
    }
    if (groups.length > 1 && threshold === 0) threshold = groups.length;
    const keyGroups = await wrapDataKey(dataKey, groups, { threshold });
    const metadata: Metadata = keepCreatedAt(
      { ...doc.metadata, keyGroups, ...(threshold !== 0 ? { shamirThreshold: threshold } : {}) },
      groups,
      old,
    );
    const out = emitEncrypted(formats.output, doc.branches, metadata, KEY_KINDS);
    await writeOutput(out, { inPlace: values["in-place"] === true, inputFile: file }, io);
    if (values["in-place"] === true) verbose(io, "File written successfully");
  } finally {
    dataKey.fill(0);
  }
}

export const groupsCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    const [action, ...operands] = positionals;
    const file = values.file;
    if (action !== "add" && action !== "delete")
      throw new BootsealError("USAGE", "groups needs add or delete");
    if (file === undefined || file === "")
      throw new BootsealError("USAGE", `groups ${action} needs --file FILE`);
    const deps = providerDeps(io.env);
    if (action === "add") {
      if (operands.length !== 0) throw new BootsealError("USAGE", "error: no positional arguments allowed");
      // Each repeated flag is one more key; keysFromFlags takes the comma-separated form.
      const joined: Values = { ...values };
      for (const k of KEY_FLAGS) {
        const list = values[k.flag as keyof typeof values];
        if (Array.isArray(list)) joined[k.flag] = list.join(",");
      }
      const added = keysFromFlags(joined, deps, io.env);
      if (added.length === 0)
        throw new BootsealError("USAGE", "groups add needs at least one key for the new group");
      await rewrap(file, values, io, (groups) => [...groups, added]);
      return 0;
    }
    if (operands.length !== 1) {
      throw new BootsealError("USAGE", "error: exactly one positional argument (index) required");
    }
    const text = operands[0] as string;
    const index = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(index)) {
      throw new BootsealError("USAGE", `failed to parse [index] argument: ${text}`);
    }
    await rewrap(file, values, io, (groups) => {
      if (index >= groups.length) {
        throw new BootsealError("USAGE", `there is no key group ${index} (the file has ${groups.length})`);
      }
      return groups.filter((_, i) => i !== index);
    });
    return 0;
  },
};
