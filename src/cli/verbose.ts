/**
 * `--verbose` (sops's global flag): progress lines on standard error, never values or keys.
 * main.ts takes the flag before the command and sets BOOTSEAL_VERBOSE for the command's run.
 */
import type { CliIo } from "./command.ts";

export const VERBOSE_ENV = "BOOTSEAL_VERBOSE";

export function isVerbose(io: CliIo): boolean {
  return io.env[VERBOSE_ENV] === "1";
}

/** One `[bootseal] INFO` line when --verbose is on. */
export function verbose(io: CliIo, message: string): void {
  if (isVerbose(io)) io.stderr.write(`[bootseal] INFO ${message}\n`);
}
