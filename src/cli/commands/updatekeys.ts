/**
 * updatekeys FILE (sops updatekeys): re-wrap the SAME data key for the key groups the
 * .sops.yaml creation rule now gives. Values, MAC, lastmodified and version are untouched;
 * the MAC is not verified (as in sops), the file is rewritten in place.
 *
 * updatekeys --recursive DIR: the same for every sops document under DIR in one run
 * (../directory-run.ts); a document no creation rule matches is skipped.
 */
import { createInterface } from "node:readline/promises";
import { KEY_KINDS } from "../../../providers/keys/index.ts";
import { findSopsConfig } from "../../config/sops-config.ts";
import { emitEncrypted, loadEncrypted } from "../../envelope/document.ts";
import { unwrapDataKey, wrapDataKey } from "../../envelope/sops/key-groups.ts";
import type { KeyResolver } from "../../envelope/sops/master-key.ts";
import { BootsealError } from "../../errors.ts";
import { replaceFile } from "../../files/atomic-write.ts";
import type { CliIo, Command } from "../command.ts";
import {
  DIRECTORY_CONCURRENCY,
  type FileOutcome,
  type ReplaceFile,
  runOverDirectory,
} from "../directory-run.ts";
import { readInput } from "../file-io.ts";
import { INPUT_TYPE_FLAG, KEYSERVICE_FLAGS, SOPS_CONFIG_FLAG, THRESHOLD_FLAG } from "../flag-groups.ts";
import { type CommandSpec, type FlagValues, parseFlags } from "../flags.ts";
import { DECRYPTION_ORDER_FLAG } from "../key-flags.ts";
import { keyResolver, keysThrough, masterKeyFromEntry, setupFromConfig } from "../key-setup.ts";
import { parseDecryptionOrder, pickFormats, providerDeps } from "../sops-file.ts";

const spec = {
  name: "updatekeys",
  summary: "re-wrap a document's data key for the keys its .sops.yaml rule now lists",
  operands: "FILE",
  forms: ["--recursive DIR [flags]"],
  flags: [
    { name: "yes", short: "y", type: "boolean", help: "pre-approve all changes and run non-interactively" },
    {
      name: "recursive",
      type: "boolean",
      help: "DIR is a directory: update every sops document under it in one run, with a summary",
    },
    THRESHOLD_FLAG,
    SOPS_CONFIG_FLAG,
    INPUT_TYPE_FLAG,
    DECRYPTION_ORDER_FLAG,
    ...KEYSERVICE_FLAGS,
  ],
} as const satisfies CommandSpec;

/**
 * sops's PrettyPrintDiffs: per group (numbered from 1, as many as the longer side has) the
 * keys kept, then "+++" added and "---" removed.
 */
export function groupDiff(current: readonly string[][], wanted: readonly string[][]): string {
  const lines: string[] = [];
  for (let g = 0; g < Math.max(current.length, wanted.length); g++) {
    const before = current[g] ?? [];
    const after = wanted[g] ?? [];
    lines.push(`Group ${g + 1}`);
    for (const id of after) if (before.includes(id)) lines.push(`    ${id}`);
    for (const id of after) if (!before.includes(id)) lines.push(`+++ ${id}`);
    for (const id of before) if (!after.includes(id)) lines.push(`--- ${id}`);
  }
  return lines.map((l) => `${l}\n`).join("");
}

/** sops's PrettyPrintShamirDiff. */
function shamirDiff(before: number, after: number): string {
  if (before > 0 && before === after) return `shamir_threshold: ${after}\n`;
  return (
    (after > 0 ? `+++ shamir_threshold: ${after}\n` : "") +
    (before > 0 ? `--- shamir_threshold: ${before}\n` : "")
  );
}

type Values = FlagValues<(typeof spec)["flags"]>;

/** What one run shares between its files: the flags, the provider set-up, one key resolver. */
interface RunContext {
  readonly values: Values;
  readonly io: CliIo;
  readonly deps: ReturnType<typeof providerDeps>;
  readonly resolve: KeyResolver;
  /** In a --recursive run, a file no creation rule matches is skipped, not an error. */
  readonly recursive: boolean;
}

async function confirm(io: CliIo): Promise<boolean> {
  if (!(io.stdin as NodeJS.ReadStream).isTTY)
    throw new BootsealError("USAGE", "updatekeys needs --yes when not run on a terminal");
  const rl = createInterface({ input: io.stdin, output: io.stdout });
  const answer = await rl.question("Is this okay? (y/n):");
  rl.close();
  return answer.trim().toLowerCase() === "y";
}

/** One document: its key groups brought in line with its creation rule. */
async function updateFile(
  file: string,
  bytes: Uint8Array,
  ctx: RunContext,
  replace: ReplaceFile = replaceFile,
): Promise<FileOutcome> {
  const { values, io, deps } = ctx;
  const formats = pickFormats(file, {
    "input-type": values["input-type"],
    "output-type": values["input-type"],
  });
  const doc = loadEncrypted(bytes, formats.input, KEY_KINDS);
  const setup = setupFromConfig(file, values.config, io, deps);
  if (!setup) {
    if (ctx.recursive) return { kind: "skipped", reason: "no .sops.yaml creation rule matches it" };
    throw new BootsealError("USAGE", "updatekeys needs a .sops.yaml creation rule for the file");
  }

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
  if (same) return { kind: "unchanged" };
  const diff = shamirDiff(doc.metadata.shamirThreshold ?? 0, threshold) + groupDiff(current, wanted);
  io.stdout.write(`The following changes will be made to the file's groups:\n${diff}`);
  if (!values.yes && !(await confirm(io))) return { kind: "skipped", reason: "not confirmed" };

  const dataKey = await unwrapDataKey(doc.metadata.keyGroups, ctx.resolve, {
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
    await replace(file, emitEncrypted(formats.input, doc.branches, metadata, KEY_KINDS));
  } finally {
    dataKey.fill(0);
  }
  return { kind: "changed" };
}

export const updatekeysCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    // sops's order: the configuration file (exit 1 without one), then the operand (100), then
    // the file (2 when it cannot be read).
    if (!findSopsConfig(io.cwd, values.config, io.env))
      throw new BootsealError("USAGE", "config file not found");
    if (positionals.length === 0) throw new BootsealError("NO_FILE", "no file specified");
    if (positionals.length !== 1) throw new BootsealError("USAGE", "updatekeys takes one file");
    const file = positionals[0] as string;
    const deps = providerDeps(io.env);
    const ctx: RunContext = {
      values,
      io,
      deps,
      resolve: keyResolver(values, deps),
      recursive: values.recursive === true,
    };
    if (ctx.recursive) {
      const words = { command: "updatekeys", changed: "updated", unchanged: "already up to date" };
      // Questions are asked one file at a time; with --yes, several files are in flight.
      const concurrency = values.yes ? DIRECTORY_CONCURRENCY : 1;
      return runOverDirectory(
        file,
        io,
        words,
        (path, bytes, replace) => updateFile(path, bytes, ctx, replace),
        concurrency,
      );
    }
    const outcome = await updateFile(file, await readInput(file, io), ctx);
    if (outcome.kind === "unchanged") io.stderr.write(`${file} already up to date\n`);
    if (outcome.kind === "changed") io.stderr.write(`${file} updated\n`);
    return 0;
  },
};
