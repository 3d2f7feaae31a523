/**
 * sops's top-level forms, translated into a bootseal command line before dispatch:
 *
 *   bootseal [flags] FILE          edit FILE (sops FILE)
 *   bootseal -d|-e|-r [flags] FILE decrypt | encrypt | rotate FILE
 *   bootseal --set 'PATH VALUE' FILE   set FILE PATH VALUE
 *   bootseal --verbose <command> … progress lines on standard error (also with the forms above)
 *
 * As in sops, flags come before FILE (words after it are ignored, with a warning), and a
 * global flag the chosen mode does not use is ignored (sops: `--extract` is "decrypt mode
 * only"). Two modes at once are refused: sops runs both and keeps the last one's output,
 * which it calls deprecated.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { BootsealError } from "../errors.ts";
import type { CliIo, Command } from "./command.ts";
import type { Flag } from "./flags.ts";
import { VERBOSE_ENV } from "./verbose.ts";

const MODES = [
  {
    name: "decrypt",
    short: "d",
    command: "decrypt",
    help: "decrypt FILE to standard output (bootseal decrypt)",
  },
  {
    name: "encrypt",
    short: "e",
    command: "encrypt",
    help: "encrypt FILE to standard output (bootseal encrypt)",
  },
  { name: "rotate", short: "r", command: "rotate", help: "a new data key for FILE (bootseal rotate)" },
] as const;

/** The mode flags and --verbose, as sops's global flags (the rest come from the target command). */
export const LEGACY_FLAGS: readonly Flag[] = [
  ...MODES.map((m): Flag => ({ name: m.name, short: m.short, type: "boolean", help: m.help })),
  {
    name: "set",
    type: "string",
    value: "'PATH VALUE'",
    help: `set PATH to the JSON VALUE in FILE, e.g. '["somekey"][0] {"somevalue":true}' (bootseal set)`,
  },
  { name: "verbose", type: "boolean", help: "print progress lines on standard error" },
];

export interface LegacyInvocation {
  readonly command: string;
  readonly args: string[];
}

/** Leading `--verbose` words (before the command) are taken off and turned on for the run. */
export function takeVerbose(argv: readonly string[], io: CliIo): { argv: string[]; io: CliIo } {
  let i = 0;
  while (argv[i] === "--verbose") i++;
  if (i === 0) return { argv: [...argv], io };
  return { argv: argv.slice(i), io: withVerbose(io) };
}

export function withVerbose(io: CliIo): CliIo {
  return {
    stdout: io.stdout,
    stderr: io.stderr,
    // A getter, as in main.ts: reading process.stdin opens it.
    get stdin() {
      return io.stdin;
    },
    env: { ...io.env, [VERBOSE_ENV]: "1" },
    cwd: io.cwd,
  };
}

/** Does argv start with one of sops's top-level forms rather than a command name? */
export function isLegacyForm(argv: readonly string[], commands: readonly string[], cwd: string): boolean {
  const first = argv[0];
  if (first === undefined || commands.includes(first)) return false;
  if (first.startsWith("-"))
    return first !== "-" && first !== "--help" && first !== "-h" && first !== "--version";
  // A bare word is a FILE, as in sops, when it exists or looks like a path: a mistyped
  // command name then stays "unknown command" instead of opening an editor on a new file.
  return existsSync(resolve(cwd, first)) || /[./\\]/.test(first);
}

function splitSet(text: string): [string, string] {
  // sops extractSetArguments: split after the first "] ".
  const at = text.indexOf("] ");
  if (at === -1) throw new BootsealError("BAD_SET_VALUE", "Invalid --set format");
  return [text.slice(0, at + 1).trimEnd(), text.slice(at + 2)];
}

/**
 * Translate a legacy command line. `load` gives the target command, whose flag table decides
 * which of the given flags it takes (and whether a flag takes a value).
 */
export async function translateLegacy(
  argv: readonly string[],
  load: (name: string) => Promise<Command>,
  io: CliIo,
): Promise<{ invocation: LegacyInvocation; io: CliIo }> {
  // Every flag any target accepts, so that a value is never mistaken for FILE.
  const targets = await Promise.all(["edit", "decrypt", "encrypt", "rotate", "set"].map(load));
  const known = new Map<string, Flag>();
  for (const f of [...LEGACY_FLAGS, ...targets.flatMap((t) => t.spec.flags)]) {
    if (!known.has(f.name)) known.set(f.name, f);
  }
  const byShort = new Map<string, Flag>();
  for (const f of known.values()) if (f.short && !byShort.has(f.short)) byShort.set(f.short, f);
  // Mode shorts win over a target's own use of the letter (sops's -d, -e, -r, -s, -i).
  for (const m of MODES) byShort.set(m.short, known.get(m.name) as Flag);

  const given: { flag: Flag; value?: string }[] = [];
  let i = 0;
  for (; i < argv.length; i++) {
    const word = argv[i] as string;
    if (word === "--") {
      i++;
      break;
    }
    if (!word.startsWith("-") || word === "-") break;
    const eq = word.indexOf("=");
    const name = word.startsWith("--") ? word.slice(2, eq === -1 ? undefined : eq) : word.slice(1);
    const flag = word.startsWith("--") ? known.get(name) : byShort.get(name);
    if (!flag) throw new BootsealError("USAGE", `flag provided but not defined: ${word}`);
    if (flag.type === "boolean") {
      given.push({ flag });
      continue;
    }
    const value = eq !== -1 && word.startsWith("--") ? word.slice(eq + 1) : argv[++i];
    if (value === undefined) throw new BootsealError("USAGE", `flag needs an argument: ${word}`);
    given.push({ flag, value });
  }
  const operands = argv.slice(i);
  const file = operands[0];
  if (file === undefined) throw new BootsealError("NO_FILE", "no file specified");
  if (operands.length > 1) {
    io.stderr.write(
      "bootseal: WARNING: more than one positional argument provided; only the first is used\n",
    );
  }

  const has = (name: string) => given.some((g) => g.flag.name === name);
  const modes = [...MODES.filter((m) => has(m.name)).map((m) => m.command), ...(has("set") ? ["set"] : [])];
  if (modes.length > 1)
    throw new BootsealError("USAGE", `give only one of --decrypt, --encrypt, --rotate, --set`);
  const command = modes[0] ?? "edit";
  const target = targets[["edit", "decrypt", "encrypt", "rotate", "set"].indexOf(command)] as Command;
  const takes = new Set(target.spec.flags.map((f) => f.name));

  const args: string[] = [];
  for (const { flag, value } of given) {
    if (LEGACY_FLAGS.includes(flag) || !takes.has(flag.name)) continue;
    args.push(`--${flag.name}`);
    if (value !== undefined) args.push(value);
  }
  if (command === "set") {
    const [path, value] = splitSet(given.find((g) => g.flag.name === "set")?.value ?? "");
    args.push("--", file, path, value);
  } else {
    args.push("--", file);
  }
  return { invocation: { command, args }, io: has("verbose") ? withVerbose(io) : io };
}

/** Translate and run a legacy command line with the command `load` gives. */
export async function runLegacy(
  argv: readonly string[],
  io: CliIo,
  load: (name: string) => Promise<Command>,
): Promise<number> {
  const { invocation, io: runIo } = await translateLegacy(argv, load, io);
  return (await load(invocation.command)).run(invocation.args, runIo);
}
