/**
 * sops's `publish [--yes] [--recursive] [--omit-extensions] FILE`: every file (or, with
 * --recursive, every file under a directory, in lexical order as Go's filepath.Walk) goes
 * to the destination of its `.sops.yaml` destination rule (./publish-file.ts). The checks run
 * in sops's order: the configuration file, the operand, the path, the directory flag.
 */
import { lstat, readdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { findSopsConfig, matchDestinationRule } from "../../config/sops-config.ts";
import { BootsealError } from "../../errors.ts";
import type { CliIo } from "../command.ts";
import { KEYSERVICE_FLAGS, SOPS_CONFIG_FLAG } from "../flag-groups.ts";
import type { CommandSpec, Flag } from "../flags.ts";
import { parseFlags } from "../flags.ts";
import { DECRYPTION_ORDER_FLAG } from "../key-flags.ts";
import { keyResolver, keysThrough, loadConfigFile } from "../key-setup.ts";
import { parseDecryptionOrder, providerDeps } from "../sops-file.ts";
import { publishFile } from "./publish-file.ts";

export const SOPS_PUBLISH_FLAGS = [
  { name: "yes", short: "y", type: "boolean", help: "pre-approve all changes and run non-interactively" },
  {
    name: "omit-extensions",
    type: "boolean",
    help: "Omit file extensions in destination path when publishing sops file to configured destinations",
  },
  {
    name: "recursive",
    type: "boolean",
    help: "If the source path is a directory, publish all its content recursively",
  },
  SOPS_CONFIG_FLAG,
  DECRYPTION_ORDER_FLAG,
  ...KEYSERVICE_FLAGS,
] as const satisfies readonly Flag[];

const SPEC = {
  name: "publish",
  operands: "FILE",
  summary: "",
  flags: SOPS_PUBLISH_FLAGS,
} as const satisfies CommandSpec;

/** Files under `path` in filepath.Walk's order (lexical, symbolic links not followed). */
async function* walk(path: string): AsyncGenerator<string> {
  const info = await lstat(path);
  if (!info.isDirectory()) {
    yield path;
    return;
  }
  const names = (await readdir(path)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const name of names) yield* walk(join(path, name));
}

/**
 * sops's prompt loop (fmt.Scanln): asks until the answer is y or n; an empty line, two words
 * or the end of the input is an error, as there.
 */
function prompter(io: CliIo): { ask: (question: string) => Promise<boolean>; close: () => void } {
  let lines: AsyncIterator<string> | undefined;
  let rl: ReturnType<typeof createInterface> | undefined;
  return {
    async ask(question) {
      if (!rl) {
        rl = createInterface({ input: io.stdin, terminal: false });
        lines = rl[Symbol.asyncIterator]();
      }
      for (;;) {
        io.stdout.write(question);
        const next = await (lines as AsyncIterator<string>).next();
        if (next.done) throw new BootsealError("USAGE", "EOF");
        const words = next.value.trim().split(/\s+/).filter(Boolean);
        if (words.length === 0) throw new BootsealError("USAGE", "unexpected newline");
        if (words.length > 1) throw new BootsealError("USAGE", "expected newline");
        if (words[0] === "y") return true;
        if (words[0] === "n") return false;
      }
    },
    close: () => rl?.close(),
  };
}

export async function runSopsPublish(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(SPEC, args, io.env);
  const location = findSopsConfig(io.cwd, values.config, io.env);
  if (!location) throw new BootsealError("USAGE", "config file not found");
  if (location.warning) io.stderr.write(`bootseal: ${location.warning}\n`);
  if (positionals.length === 0) throw new BootsealError("NO_FILE", "Error: no file specified");
  const root = positionals[0] as string;
  if (positionals.length > 1)
    io.stderr.write("bootseal: more than one positional argument given; only the first is used\n");
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(resolve(io.cwd, root));
  } catch {
    throw new BootsealError("USAGE", `stat ${root}: no such file or directory`);
  }
  if (info.isDirectory() && !values.recursive)
    throw new BootsealError("USAGE", "can't operate on a directory without --recursive flag.");
  const order = parseDecryptionOrder(values["decryption-order"]);
  const deps = providerDeps(io.env);
  const resolver = keyResolver(values, deps);
  const prompt = prompter(io);
  try {
    for await (const file of walk(resolve(io.cwd, root))) {
      // The walk yields absolute paths; sops's are the operand joined with the sub-path.
      const start = resolve(io.cwd, root);
      const given = file === start ? root : join(root, file.slice(start.length));
      const config = loadConfigFile(location.path);
      const rule = matchDestinationRule(config, given);
      const published = await publishFile({
        config,
        rule,
        file: given,
        ...(values.recursive ? { root } : {}),
        omitExtensions: values["omit-extensions"] === true,
        deps,
        resolve: resolver,
        ...(order ? { order } : {}),
        through: (groups) => keysThrough(groups, values),
        confirm: values.yes ? async () => true : prompt.ask,
        io,
      });
      if (!published) {
        const msg = `Publication of ${resolve(io.cwd, given)} canceled`;
        if (!values.recursive) throw new BootsealError("USAGE", msg);
        io.stdout.write(`${msg}\n`);
      }
    }
  } finally {
    prompt.close();
  }
  return 0;
}
