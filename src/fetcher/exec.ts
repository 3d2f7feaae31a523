/**
 * --exec: the bootstrap command (e.g. `kubeadm join --config /etc/kubernetes/join.yaml`),
 * run by /bin/sh -c after the files are written. Its stdout and stderr are passed through as
 * they come (under systemd both land in the journal), and the last 16 KiB of the two,
 * interleaved as they arrived, are kept for the status report. A timeout, when set, sends
 * SIGTERM and, 10 s later, SIGKILL to the command's whole process group.
 */
import { spawn } from "node:child_process";
import { BootsealError } from "../errors.ts";

export const OUTPUT_TAIL_BYTES = 16 * 1024;

/**
 * The umask the bootstrap command and a cloud-config's commands run with: cloud-init's (022),
 * so what kubeadm and runcmd create is 0644 / 0755 as on a cloud-init machine. The fetcher
 * itself runs under the unit's UMask=0077, which only bootseal's own secrets need.
 */
export const COMMAND_UMASK = 0o022;

/**
 * spawn() has no umask option and a child inherits the parent's at fork: set it for the one
 * synchronous spawn call and put it back (the fetcher is single-threaded; a Worker may not set it).
 */
function withUmask<T>(mask: number, start: () => T): T {
  if (process.platform === "win32") return start();
  const previous = process.umask(mask);
  try {
    return start();
  } finally {
    process.umask(previous);
  }
}

export interface ExecOptions {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly cwd?: string;
  /** 0 or undefined: no limit. */
  readonly timeoutMs?: number;
  readonly shell?: string;
}

export interface ExecResult {
  /** null when a signal ended it. */
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timedOut: boolean;
  /** The last 16 KiB of stdout and stderr, as text (a split UTF-8 sequence becomes U+FFFD). */
  readonly outputTail: string;
}

/** Keeps the last `limit` bytes written to it. */
export class TailBuffer {
  readonly #limit: number;
  #chunks: Buffer[] = [];
  #size = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  push(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    while (this.#size - (this.#chunks[0]?.length ?? 0) >= this.#limit) {
      this.#size -= (this.#chunks.shift() as Buffer).length;
    }
  }

  bytes(): Buffer {
    const all = Buffer.concat(this.#chunks);
    return all.length > this.#limit ? all.subarray(all.length - this.#limit) : all;
  }

  text(): string {
    return new TextDecoder().decode(this.bytes());
  }
}

/** `/bin/sh -c COMMAND` (--exec, a cloud-config's string commands). */
export function runCommand(command: string, options: ExecOptions): Promise<ExecResult> {
  return runArgv([options.shell ?? "/bin/sh", "-c", command], options);
}

/** ARGV exec'd as it is, no shell (a cloud-config's list commands); PATH is searched for ARGV[0]. */
export function runArgv(argv: readonly string[], options: ExecOptions): Promise<ExecResult> {
  const [file, ...args] = argv;
  if (file === undefined) throw new Error("runArgv needs a program");
  return new Promise((resolve, reject) => {
    const child = withUmask(COMMAND_UMASK, () =>
      spawn(file, args, {
        env: options.env as NodeJS.ProcessEnv,
        stdio: ["ignore", "pipe", "pipe"],
        detached: true, // own process group, so a timeout reaches what the shell started
        ...(options.cwd ? { cwd: options.cwd } : {}),
      }),
    );
    const tail = new TailBuffer(OUTPUT_TAIL_BYTES);
    child.stdout.on("data", (c: Buffer) => {
      tail.push(c);
      options.stdout.write(c);
    });
    child.stderr.on("data", (c: Buffer) => {
      tail.push(c);
      options.stderr.write(c);
    });
    let timedOut = false;
    let killTimer: NodeJS.Timeout | undefined;
    const timer =
      options.timeoutMs && options.timeoutMs > 0
        ? setTimeout(() => {
            timedOut = true;
            signalGroup(child.pid, "SIGTERM");
            killTimer = setTimeout(() => signalGroup(child.pid, "SIGKILL"), 10_000);
          }, options.timeoutMs)
        : undefined;
    child.on("error", (err) => {
      clearTimeout(timer);
      clearTimeout(killTimer);
      reject(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      clearTimeout(killTimer);
      resolve({ exitCode: code, signal, timedOut, outputTail: tail.text() });
    });
  });
}

/** A bootstrap command that did not exit 0, with what the status report needs. */
export class ExecFailedError extends BootsealError {
  readonly result: ExecResult;

  /** `what`: the command as messages name it ("the bootstrap command", "runcmd entry 2 of 3"). */
  constructor(result: ExecResult, what = "the bootstrap command") {
    const how = result.timedOut
      ? "timed out and was killed"
      : result.exitCode !== null
        ? `exited with code ${result.exitCode}`
        : `was killed by ${result.signal}`;
    super("EXEC_FAILED", `${what} ${how}`);
    this.name = "ExecFailedError";
    this.result = result;
  }
}

function signalGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}
