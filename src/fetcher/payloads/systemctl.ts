/** The SystemdControl an Ignition config is applied with: `systemctl ARGS` (--systemctl PATH). */
import { BootsealError } from "../../errors.ts";
import { runArgv } from "../exec.ts";
import type { SystemdControl } from "./ignition.ts";

export interface SystemctlOptions {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
}

export function systemctlControl(path: string, options: SystemctlOptions): SystemdControl {
  return {
    async run(args) {
      const what = `${path} ${args.join(" ")}`.slice(0, 200);
      const result = await runArgv([path, ...args], options).catch((err: NodeJS.ErrnoException) => {
        throw new BootsealError("EXEC_FAILED", `${what}: could not start (${err.code ?? "error"})`);
      });
      if (result.exitCode !== 0) {
        throw new BootsealError(
          "EXEC_FAILED",
          `${what} ${result.exitCode !== null ? `exited with code ${result.exitCode}` : `was killed by ${result.signal}`}`,
        );
      }
    },
  };
}
