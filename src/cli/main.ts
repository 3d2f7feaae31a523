#!/usr/bin/env node
/**
 * bootseal: one command, subcommands in ./commands (one file each). Failures print one line
 * on stderr and exit with the code of their class (./exit-codes.ts, docs/cli.md: sops's
 * number where sops has the failure); a stack trace appears only with BOOTSEAL_DEBUG=1.
 */
import { enableCompileCache } from "node:module";
import { fileURLToPath } from "node:url";
import { packageVersion } from "../config/package-root.ts";
import { BootsealError, describeError, type ErrorCode } from "../errors.ts";
import { nodeFs } from "../files/node-fs.ts";
import type { CliIo, Command } from "./command.ts";
import { COMMAND_NAMES, COMMANDS, loadAllCommands, loadCommand } from "./command-registry.ts";
import { EXIT_CODES, EXIT_OK } from "./exit-codes.ts";
import { helpText } from "./flags.ts";
import { isLegacyForm, runLegacy, takeVerbose } from "./legacy-args.ts";

/**
 * The summaries come from each command's own table (one source), so this loads every command:
 * slower than one command's start-up, which only `--help` and a bare `bootseal` pay.
 */
export async function help(): Promise<string> {
  const commands = await loadAllCommands();
  const width = Math.max(...commands.map((c) => c.spec.name.length));
  const lines = commands.map((c) => `  ${c.spec.name.padEnd(width)}  ${c.spec.summary}`);
  return [
    "bootseal: machine bootstrap secrets as SOPS v3 documents",
    "",
    "usage: bootseal <command> [flags]",
    "",
    "commands:",
    ...lines,
    "",
    "Run 'bootseal <command> --help' for a command's flags; exit codes are listed in docs/cli.md.",
    "",
  ].join("\n");
}

function describe(err: unknown): { message: string; code: number; name: ErrorCode } {
  // node:util parseArgs reports unknown or malformed flags with these codes.
  const parseCode = (err as { code?: unknown } | null)?.code;
  if (typeof parseCode === "string" && parseCode.startsWith("ERR_PARSE_ARGS")) {
    return { message: (err as Error).message, code: EXIT_CODES.USAGE, name: "USAGE" };
  }
  const { code, message } = describeError(err, "internal error: ");
  return { message, code: EXIT_CODES[code], name: code };
}

/** The command has a `--json` flag and it is given (before a `--`): its failure is JSON too. */
function wantsJson(command: Command | undefined, args: readonly string[]): boolean {
  if (!command?.spec.flags.some((f) => f.name === "json")) return false;
  const end = args.indexOf("--");
  return (end === -1 ? args : args.slice(0, end)).some((a) => a === "--json" || /^--json=true$/i.test(a));
}

export async function main(args: readonly string[], cliIo: CliIo): Promise<number> {
  // sops's global --verbose, before the command.
  const { argv, io } = takeVerbose(args, cliIo);
  const [name, ...rest] = argv;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    // A bare `sops` is its legacy form without a file: "no file specified" (100); a failure
    // writes nothing on standard output, so the help goes to stderr then.
    if (name === undefined) {
      io.stderr.write(await help());
      return EXIT_CODES.NO_FILE;
    }
    io.stdout.write(await help());
    return EXIT_OK;
  }
  if (name === "--version" || name === "version") {
    io.stdout.write(`bootseal ${packageVersion()}\n`);
    return EXIT_OK;
  }
  const entry = COMMANDS.find((c) => c.name === name);
  let command: Command | undefined;
  try {
    if (!entry && isLegacyForm(argv, COMMAND_NAMES, io.cwd)) return await runLegacy(argv, io, loadCommand);
    if (!entry) throw new BootsealError("USAGE", `unknown command "${name}"; see 'bootseal --help'`);
    command = await entry.load();
    if (rest.includes("--help") || rest.includes("-h")) {
      io.stdout.write(helpText(command.spec));
      return EXIT_OK;
    }
    return await command.run(rest, io);
  } catch (err) {
    const { message, code, name: errorCode } = describe(err);
    if (wantsJson(command, rest)) {
      // The client errors end in their code (service-client.ts): the object has it as a field.
      const text = message.endsWith(` (${errorCode})`) ? message.slice(0, -errorCode.length - 3) : message;
      io.stderr.write(`${JSON.stringify({ error: { code: errorCode, message: text, exit: code } })}\n`);
    } else io.stderr.write(`bootseal: ${message}\n`);
    if (io.env.BOOTSEAL_DEBUG === "1" && err instanceof Error && err.stack) io.stderr.write(`${err.stack}\n`);
    return code;
  }
}

function isEntryPoint(): boolean {
  // npm links bin entries as symlinks: compare real paths.
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    const { realpathSync } = nodeFs();
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

/**
 * Runs the command line of this process and sets its exit code: the npm bin entry
 * (./bin.ts, once it has checked the Node version) calls it, as does `node src/cli/main.ts`.
 */
export function runCli(): void {
  // V8's code cache on disk (Node 22+): later runs skip most parsing of the bundle.
  enableCompileCache?.();
  const io: CliIo = {
    stdout: process.stdout,
    stderr: process.stderr,
    // A getter: process.stdin opens the stream on first access, which costs start-up time
    // for every command that reads a file.
    get stdin() {
      return process.stdin;
    },
    env: process.env,
    cwd: process.cwd(),
  };
  main(process.argv.slice(2), io).then((code) => {
    process.exitCode = code;
  });
}

if (isEntryPoint()) runCli();
