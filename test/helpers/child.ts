/**
 * Runs a program as a child process with some bytes on its stdin and collects what it
 * prints. A child that exits (or closes its stdin) before reading all of its input is an
 * ordinary outcome here, not a crash of the test run: see the stdin 'error' listener.
 */
import { type ChildProcess, spawn } from "node:child_process";

export interface ChildResult {
  /** The exit code; null when a signal ended the child (named at the end of stderr). */
  readonly status: number | null;
  readonly stdout: Buffer;
  readonly stderr: string;
}

export interface ChildOptions {
  readonly env: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** Written to the child's stdin, which is then closed; nothing when absent. */
  readonly input?: Uint8Array;
  /** Killed (SIGKILL) after this long; default CHILD_TIMEOUT_MS. */
  readonly timeoutMs?: number;
}

/** How long runChild lets a child run (the slowest takes seconds). */
export const CHILD_TIMEOUT_MS = 300_000;

export function runChild(cmd: string, args: readonly string[], options: ChildOptions): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: options.env, cwd: options.cwd, stdio: ["pipe", "pipe", "pipe"] });
    // A child that never ends is killed (its test then fails on the status) instead of holding
    // the test file, and so the run, until CI's limit. (spawn's own `timeout` keeps its timer
    // when the program does not exist, holding the test file for the whole timeout.)
    const limit = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? CHILD_TIMEOUT_MS).unref();
    child.on("error", () => clearTimeout(limit));
    const out: Buffer[] = [];
    let err = "";
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => {
      err += c.toString();
    });
    child.on("error", reject);
    // Writing to a child that has already exited fails with EPIPE (or ECONNRESET) on the
    // stdin stream; without a listener that is an unhandled 'error' that fails the whole
    // test file. The exit status and stderr, awaited below, say what the child did.
    child.stdin.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code !== "EPIPE" && e.code !== "ECONNRESET") reject(e);
    });
    // 'close', not 'exit': it comes after the exit AND after stdout and stderr have ended,
    // so the collected output is complete.
    child.on("close", (status, signal) => {
      clearTimeout(limit);
      resolve({ status, stdout: Buffer.concat(out), stderr: signal ? `${err}\n(killed by ${signal})` : err });
    });
    child.stdin.end(options.input ?? Buffer.alloc(0));
  });
}

/** How long stopChild waits after its signal before SIGKILL. */
export const STOP_GRACE_MS = 20_000;

/**
 * Sends `signal` and resolves with the exit code once the child has exited (null: ended by a
 * signal). A child still there `graceMs` later is killed with SIGKILL and the promise rejects
 * with what it printed: a stop that hangs fails its test in seconds instead of holding the
 * whole run to CI's limit, as a `serve` stuck in process.exit once did (src/exit-when-idle.ts).
 */
export function stopChild(
  child: ChildProcess,
  { signal = "SIGTERM", graceMs = STOP_GRACE_MS, output = () => "" }: StopOptions = {},
): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`pid ${child.pid} did not exit within ${graceMs} ms of ${signal}: ${output()}`));
    }, graceMs);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    child.kill(signal);
  });
}

export interface StopOptions {
  readonly signal?: NodeJS.Signals;
  readonly graceMs?: number;
  /** What the child printed so far, for the failure message. */
  readonly output?: () => string;
}
