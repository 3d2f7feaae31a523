/**
 * Running the COMMAND of exec-env and exec-file the way sops does
 * (cmd/sops/subcommand/exec): `/bin/sh -c COMMAND` with the terminal's stdin, stdout and
 * stderr, its exit status passed through (255 when a signal ended it, as Go's -1 becomes);
 * `--user` switches this whole process to that user first (as sops does, so the temporary
 * file belongs to them), and `--background` starts the command without waiting.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { BootsealError } from "../errors.ts";
import type { CliIo } from "./command.ts";

type Env = Record<string, string>;

export interface UnixUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  readonly home: string;
  readonly groups: number[];
}

function readLines(path: string): string[][] {
  try {
    return readFileSync(path, "utf8")
      .split("\n")
      .filter((l) => l !== "" && !l.startsWith("#"))
      .map((l) => l.split(":"));
  } catch {
    return [];
  }
}

/**
 * A user from /etc/passwd, by name as Go's user.Lookup (without cgo) finds them, with the
 * group ids Go's GroupIds gives: the primary group and every /etc/group entry naming them.
 */
export function lookupUser(name: string): UnixUser {
  const row = readLines("/etc/passwd").find((f) => f[0] === name) ?? null;
  if (row === null) throw new BootsealError("BAD_INPUT", `--user: unknown user ${name}`);
  const uid = Number(row[2]);
  const gid = Number(row[3]);
  const groups = new Set([gid]);
  for (const g of readLines("/etc/group")) {
    if ((g[3] ?? "").split(",").includes(name)) groups.add(Number(g[2]));
  }
  return { name, uid, gid, home: row[5] ?? "", groups: [...groups] };
}

/** What sops adds to the command's environment for `--user` (UserEnv). */
export function userEnv(user: UnixUser): Env {
  return { HOME: user.home, USER: user.name, LOGNAME: user.name };
}

/** setgroups, setgid, setuid: irreversible, for the rest of this process (sops SwitchUser). */
export function switchUser(user: UnixUser): void {
  try {
    process.setgroups?.(user.groups);
    process.setgid?.(user.gid);
    process.setuid?.(user.uid);
  } catch (cause) {
    const why = (cause as NodeJS.ErrnoException).code ?? "failed";
    throw new BootsealError("EXEC_FAILED", `--user: cannot switch to ${user.name} (${why})`, { cause });
  }
}

/** The environment sops builds: the current one (unless pristine), then the user's, then `extra`. */
export function childEnv(io: CliIo, pristine: boolean, user: UnixUser | null, extra: Env): Env {
  const base: Env = {};
  if (!pristine) {
    for (const [k, v] of Object.entries(io.env)) if (v !== undefined) base[k] = v;
  }
  return { ...base, ...(user ? userEnv(user) : {}), ...extra };
}

function checkEnv(env: Env): void {
  for (const [k, v] of Object.entries(env)) {
    if (k.includes("\0") || v.includes("\0")) {
      throw new BootsealError("BAD_INPUT", "a value for the environment contains a NUL byte");
    }
  }
}

/** Whether io is the process's own terminal (then the child inherits it, as sops's does). */
function isProcessIo(io: CliIo): boolean {
  return io.stdout === process.stdout && io.stderr === process.stderr;
}

/**
 * Runs `/bin/sh -c command`. Background: started with no stdio and not waited for (0).
 * Otherwise resolves to the exit status; a non-zero one is also reported on stderr, as
 * sops does ("exit status N").
 */
export function runShell(
  command: string,
  env: Env,
  io: CliIo,
  options: { background: boolean; onExit?: () => void },
): Promise<number> {
  checkEnv(env);
  const own = isProcessIo(io) && !options.background;
  // While the command runs, a SIGTERM or SIGHUP for bootseal goes to it instead, so that
  // bootseal outlives it and removes the temporary file; SIGINT from a terminal reaches the
  // command already (same process group), so bootseal only waits. Installed before the
  // spawn: a signal sent as soon as the command shows signs of life must not find the default.
  let child: ChildProcess | undefined;
  const forward = (signal: NodeJS.Signals) => child?.kill(signal);
  const wait = () => {};
  const listen = (on: boolean) => {
    if (!own) return;
    for (const [sig, fn] of [
      ["SIGTERM", forward],
      ["SIGHUP", forward],
      ["SIGINT", wait],
    ] as const) {
      if (on) process.on(sig, fn);
      else process.off(sig, fn);
    }
  };
  listen(true);
  return new Promise<number>((resolve, reject) => {
    const proc = spawn("/bin/sh", ["-c", command], {
      env,
      stdio: options.background ? "ignore" : own ? "inherit" : ["ignore", "pipe", "pipe"],
    });
    child = proc;
    proc.on("error", (cause) =>
      reject(
        new BootsealError("EXEC_FAILED", `cannot run /bin/sh: ${(cause as NodeJS.ErrnoException).code}`),
      ),
    );
    if (options.background) {
      proc.on("spawn", () => {
        proc.unref();
        resolve(0);
      });
      return;
    }
    proc.stdout?.pipe(io.stdout, { end: false });
    proc.stderr?.pipe(io.stderr, { end: false });
    proc.on("close", (code, signal) => {
      options.onExit?.();
      if (code === 0) return resolve(0);
      io.stderr.write(signal ? `bootseal: signal: ${signal}\n` : `bootseal: exit status ${code}\n`);
      resolve(code ?? 255);
    });
  }).finally(() => listen(false));
}

/** `--same-process`: replace this process with the shell (sops's syscall.Exec). */
export function execShell(command: string, env: Env): never {
  checkEnv(env);
  if (typeof process.execve !== "function") {
    throw new BootsealError(
      "UNSUPPORTED",
      "--same-process needs Node's process.execve (Node 23.11 or later)",
    );
  }
  return process.execve("/bin/sh", ["/bin/sh", "-c", command], env);
}
