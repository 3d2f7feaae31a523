/**
 * Runs the real `bootseal serve` process with a temporary bootseal.yaml, and small HTTP
 * helpers for the integration suite. Every process's stdout and stderr are kept, so a test
 * can check what reached the logs.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { stopChild } from "../helpers/child.ts";

export const MAIN_TS = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));

export interface Served {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  stop(): Promise<number | null>;
}

/** `entry`: the CLI to run; bench/service.ts passes the bundle (dist/cli/main.js). */
export function serve(
  dir: string,
  name: string,
  config: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
  entry: string = MAIN_TS,
): Promise<Served> {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, stringify(config));
  const child = spawn(process.execPath, [entry, "serve", "--config", file, "--listen", "127.0.0.1:0"], {
    stdio: ["ignore", "pipe", "pipe"],
    env,
    cwd: dir,
  });
  let out = "";
  child.stdout?.on("data", (c: Buffer) => {
    out += c.toString();
  });
  child.stderr?.on("data", (c: Buffer) => {
    out += c.toString();
  });
  const stop = () => stopChild(child, { output: () => out });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name}: serve did not start: ${out}`)), 30_000);
    const onData = () => {
      const m = /listening on (http\S+)/.exec(out);
      if (m && out.includes("controllers:")) {
        clearTimeout(timer);
        child.stdout?.off("data", onData);
        child.stderr?.off("data", onData);
        resolve({ url: m[1] as string, child, output: () => out, stop });
      }
    };
    // The banner is on stderr, the JSON log on stdout: either may complete the picture.
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${name}: serve exited early (${code}): ${out}`));
    });
  });
}

export interface Call {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Buffer;
  json<T = Record<string, unknown>>(): T;
}

export async function call(
  url: string,
  init: {
    method?: string;
    token?: string;
    headers?: Record<string, string>;
    body?: string | Uint8Array;
  } = {},
): Promise<Call> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  const res = await fetch(url, {
    method: init.method ?? "GET",
    headers,
    ...(init.body !== undefined ? { body: init.body } : {}),
  });
  const body = Buffer.from(await res.arrayBuffer());
  return {
    status: res.status,
    headers: res.headers,
    body,
    json<T>() {
      return JSON.parse(body.toString("utf8")) as T;
    },
  };
}

export interface PublishResult {
  version: number;
  etag: string;
  sha256: string;
  bootstrapToken: string;
  tokenExpiresAt: string;
}
