/**
 * Running a payload's commands (a cloud-config's bootcmd and runcmd) in order, stopping at
 * the first that does not exit 0. A string runs through `/bin/sh -c`, a list is exec'd as its
 * argv with no shell. Each gets the machine's environment plus BOOTSEAL_ROOT, the --root
 * directory as its working directory (`/` on a machine, as cloud-init), and --exec-timeout.
 * The text of a command is never logged or reported: it comes from the decrypted payload.
 */
import { ExecFailedError, type ExecResult, runArgv, runCommand } from "../exec.ts";
import type { CloudCommand } from "./cloud-config-parse.ts";

export interface CommandRunOptions {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  /** The --root directory (host path): cwd and BOOTSEAL_ROOT. */
  readonly root: string;
  readonly timeoutMs?: number;
  /** Told before each command starts ("runcmd 2 of 3"). */
  readonly onStart?: (label: string) => void;
}

export type CommandRunner = (
  module: string,
  commands: readonly CloudCommand[],
) => Promise<readonly ExecResult[]>;

/** Runs each command in turn; throws ExecFailedError (with its result) at the first failure. */
export async function runCommands(
  module: string,
  commands: readonly CloudCommand[],
  options: CommandRunOptions,
): Promise<ExecResult[]> {
  const results: ExecResult[] = [];
  const exec = {
    env: { ...options.env, BOOTSEAL_ROOT: options.root },
    stdout: options.stdout,
    stderr: options.stderr,
    cwd: options.root,
    ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
  };
  for (const [i, command] of commands.entries()) {
    const label = `${module} ${i + 1} of ${commands.length}`;
    options.onStart?.(label);
    let result: ExecResult;
    try {
      result = "shell" in command ? await runCommand(command.shell, exec) : await runArgv(command.argv, exec);
    } catch (err) {
      // spawn failed (a list's program not found, not executable): the shell's 127/126.
      const code = (err as NodeJS.ErrnoException).code ?? "error";
      result = {
        exitCode: code === "EACCES" ? 126 : 127,
        signal: null,
        timedOut: false,
        outputTail: `${label}: could not start the program (${code})\n`,
      };
    }
    results.push(result);
    if (result.exitCode !== 0) throw new ExecFailedError(result, label);
  }
  return results;
}
