/** What every subcommand file exports: its name, one help line, and run(). */
export interface CliIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly stdin: NodeJS.ReadableStream;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
}

export interface Command {
  readonly name: string;
  readonly summary: string;
  readonly usage: string;
  /** Resolves to the exit code; throws BootsealError for failures (main maps them). */
  run(args: string[], io: CliIo): Promise<number>;
}

/** The command table entry: help text is available without loading the command's module. */
export interface CommandEntry {
  readonly name: string;
  readonly summary: string;
  /** Lazy, so `bootseal decrypt` never loads Fastify or the cloud SDKs. */
  load(): Promise<Command>;
}
