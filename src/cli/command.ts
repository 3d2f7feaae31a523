import type { CommandSpec } from "./flags.ts";

export interface CliIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly stdin: NodeJS.ReadableStream;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
}

/** What every subcommand file exports: its flag table (./flags.ts) and run(). */
export interface Command {
  /** Name, summary, operands and flags: the parser, `--help` and docs/cli.md come from it. */
  readonly spec: CommandSpec;
  /** Resolves to the exit code; throws BootsealError for failures (main maps them). */
  run(args: string[], io: CliIo): Promise<number>;
}

/** The command table entry. */
export interface CommandEntry {
  readonly name: string;
  /** Lazy, so `bootseal decrypt` never loads Fastify or the cloud SDKs. */
  load(): Promise<Command>;
}
