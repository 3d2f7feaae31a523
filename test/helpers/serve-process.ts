/**
 * A real `bootseal serve` process for end-to-end tests: started on a free loopback port, waited
 * for (bounded) until /healthz answers, stopped gently or with SIGKILL.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { CLI, REPO } from "../fetcher/helpers.ts";
import { stopChild } from "./child.ts";
import { freePort } from "./ports.ts";

export interface Service {
  readonly url: string;
  readonly process: ChildProcess;
  log(): string;
  stop(): Promise<void>;
  kill9(): Promise<void>;
}

/** Starts `bootseal serve` and waits (bounded, 60 s) until /healthz answers. */
export async function startService(
  config: string,
  env: Record<string, string | undefined>,
  port?: number,
): Promise<Service> {
  return startServeCommand([process.execPath, CLI, "serve", "--config", config], { env, cwd: REPO }, port);
}

/**
 * Starts `command` (a `bootseal serve` command line: the source, the bundle, an installed bin,
 * the single executable), with `--listen` on a free loopback port appended, and waits (bounded,
 * 60 s) until /healthz answers.
 */
export async function startServeCommand(
  command: readonly [string, ...string[]],
  options: { readonly env: Record<string, string | undefined>; readonly cwd: string },
  port?: number,
): Promise<Service> {
  const listen = port ?? (await freePort());
  const [file, ...args] = command;
  const child = spawn(file, [...args, "--listen", `127.0.0.1:${listen}`], {
    env: options.env as NodeJS.ProcessEnv,
    cwd: options.cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (c) => {
    output += c;
  });
  child.stderr?.on("data", (c) => {
    output += c;
  });
  const url = `http://127.0.0.1:${listen}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`bootseal serve exited: ${output}`);
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (i > 600) throw new Error(`bootseal serve did not come up: ${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const end = async (signal: NodeJS.Signals) => {
    await stopChild(child, { signal, output: () => output });
  };
  return { url, process: child, log: () => output, stop: () => end("SIGTERM"), kill9: () => end("SIGKILL") };
}
