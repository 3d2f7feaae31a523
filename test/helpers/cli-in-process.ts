/**
 * `bootseal ARGS` run in-process (src/cli/main.ts) with collected output, shaped like a
 * child's result (./child.ts) so a test can put it beside a real sops process.
 */
import { PassThrough } from "node:stream";
import { main } from "../../src/cli/main.ts";
import type { ChildResult } from "./child.ts";

export interface InProcessOptions {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** Standard input; empty when absent. */
  readonly input?: Uint8Array;
}

export async function runBootsealInProcess(
  args: readonly string[],
  options: InProcessOptions,
): Promise<ChildResult> {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: Buffer[] = [];
  let err = "";
  stdout.on("data", (c: Buffer) => out.push(c));
  stderr.on("data", (c: Buffer) => {
    err += c.toString();
  });
  stdin.end(options.input ?? Buffer.alloc(0));
  const status = await main(args, { stdin, stdout, stderr, env: options.env, cwd: options.cwd });
  return { status, stdout: Buffer.concat(out), stderr: err };
}
