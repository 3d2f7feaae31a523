/**
 * The machine as cloud-init's distro layer sees it, under --root: its programs on PATH
 * (subp.which), its accounts (read fresh each time, since the commands change them), the
 * files cloud-init writes with its modes and owners, and its own commands (useradd,
 * systemctl …) through the payload command runner, so tests record them. Paths never go
 * through a symbolic link (cloud-init would follow it; bootseal refuses).
 */
import { constants } from "node:fs";
import { chmod, chown, lstat, mkdir, open, readFile, rename } from "node:fs/promises";
import { join, posix } from "node:path";
import { BootsealError, hasCode } from "../../errors.ts";
import { type Accounts, parseGroup, parsePasswd } from "../owners.ts";
import { displayPath } from "../paths.ts";

/** cloud-init 22.4.2: the version its file headers name. */
export const CLOUD_INIT_VERSION = "22.4.2";

/** The PATH cloud-init runs with under systemd: where subp.which looks. */
const SYSTEMD_PATH = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];

export interface Machine {
  /** The --root directory (host path). */
  readonly root: string;
  /** The payload command runner (commands.ts's CommandRunner; typed here so no import circles back). */
  readonly run: (
    module: string,
    commands: readonly { readonly argv: readonly string[] }[],
  ) => Promise<unknown>;
  readonly log: (line: string) => void;
  /** The clock file headers are stamped with. */
  readonly now: () => Date;
}

export function bad(module: string, message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `cloud-config: ${module}: ${message}`);
}

/** A name for a message: quoted, at most 64 characters. */
export function shownName(name: string): string {
  return JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);
}

/** The host path of a machine path; throws when a component on the way is a link. */
export async function hostPath(m: Machine, path: string): Promise<string> {
  const parts = posix.resolve("/", path).split("/").filter(Boolean);
  let at = m.root;
  for (const part of parts) {
    at = join(at, part);
    const info = await lstat(at).catch(() => null);
    if (info === null) break;
    if (info.isSymbolicLink())
      throw new BootsealError("PATH_NOT_ALLOWED", `${displayPath(path)}: a symbolic link on the way`);
  }
  return join(m.root, posix.resolve("/", path));
}

export async function exists(m: Machine, path: string): Promise<boolean> {
  return (await lstat(await hostPath(m, path)).catch(() => null)) !== null;
}

export async function isDir(m: Machine, path: string): Promise<boolean> {
  return (await lstat(await hostPath(m, path)).catch(() => null))?.isDirectory() === true;
}

/** subp.which: an absolute path as is, a name on PATH; an executable regular file. */
export async function which(m: Machine, program: string): Promise<boolean> {
  const candidates = program.includes("/") ? [program] : SYSTEMD_PATH.map((d) => `${d}/${program}`);
  for (const c of candidates) {
    const info = await lstat(join(m.root, c)).catch(() => null);
    if (info?.isFile() && (info.mode & 0o111) !== 0) return true;
  }
  return false;
}

/** The root's own accounts (no fallback to the host's: these are the machine's). */
export async function accounts(m: Machine): Promise<Accounts> {
  const read = (f: string): Promise<string> => readFile(join(m.root, "etc", f), "utf8").catch(() => "");
  return { users: parsePasswd(await read("passwd")), groups: parseGroup(await read("group")) };
}

export async function readText(m: Machine, path: string): Promise<string | null> {
  const host = await hostPath(m, path);
  return readFile(host, "utf8").catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return null;
    throw err;
  });
}

/** util.ensure_dir: makedirs (0755 under cloud-init's umask 022), then chmod when a mode is given. */
export async function ensureDir(m: Machine, path: string, mode?: number): Promise<void> {
  const host = await hostPath(m, path);
  const parts = posix.resolve("/", path).split("/").filter(Boolean);
  let at = m.root;
  for (const part of parts) {
    at = join(at, part);
    const info = await lstat(at).catch(() => null);
    if (info === null) {
      await mkdir(at);
      await chmod(at, 0o755);
    } else if (!info.isDirectory()) {
      throw new BootsealError("PATH_NOT_ALLOWED", `${displayPath(path)} is not a directory`);
    }
  }
  if (mode !== undefined) await chmod(host, mode);
}

/**
 * util.write_file: the directory ensured, the file truncated or appended (never through a
 * link), then chmod to mode (none: a new file gets 0644, 0666 under umask 022).
 */
export async function writeText(
  m: Machine,
  path: string,
  content: string,
  options: { readonly mode?: number; readonly append?: boolean },
): Promise<void> {
  await ensureDir(m, posix.dirname(posix.resolve("/", path)));
  const host = await hostPath(m, path);
  const flags =
    constants.O_WRONLY |
    constants.O_CREAT |
    constants.O_NOFOLLOW |
    (options.append ? constants.O_APPEND : constants.O_TRUNC);
  const handle = await open(host, flags, 0o644);
  try {
    await handle.writeFile(content);
  } finally {
    await handle.close();
  }
  if (options.mode !== undefined) await chmod(host, options.mode);
}

export async function chownPath(m: Machine, path: string, uid: number, gid: number): Promise<void> {
  await chown(await hostPath(m, path), uid, gid);
}

export async function renamePath(m: Machine, from: string, to: string): Promise<void> {
  await rename(await hostPath(m, from), await hostPath(m, to));
}

/** The mode bits of a path (util.get_permissions), null when it does not exist. */
export async function modeOf(
  m: Machine,
  path: string,
): Promise<{ mode: number; uid: number; gid: number } | null> {
  const info = await lstat(await hostPath(m, path)).catch(() => null);
  return info ? { mode: info.mode & 0o7777, uid: info.uid, gid: info.gid } : null;
}

/** util.make_header: `# Created by cloud-init v. 22.4.2 on Tue, 02 Dec 2025 10:11:12 +0000`. */
export function cloudInitHeader(now: Date, base: "created" | "added"): string {
  // toUTCString: "Tue, 02 Dec 2025 10:11:12 GMT", the C locale's names and padding.
  const [day, date, month, year, time] = now.toUTCString().replace(",", "").split(" ");
  return `# ${base === "created" ? "Created" : "Added"} by cloud-init v. ${CLOUD_INIT_VERSION} on ${day}, ${date} ${month} ${year} ${time} +0000`;
}

/**
 * One of the machine's programs, as subp runs it: exit 0 or the run fails (EXEC_FAILED).
 * `tolerate` is for what cloud-init only logs (groupadd): false then, instead of a failure.
 */
export async function runTool(
  m: Machine,
  module: string,
  argv: readonly string[],
  tolerate = false,
): Promise<boolean> {
  try {
    await m.run(module, [{ argv }]);
    return true;
  } catch (err) {
    if (tolerate && hasCode(err, "EXEC_FAILED")) {
      m.log(`cloud-config: ${module}: ${argv[0]} failed; carrying on, as cloud-init does`);
      return false;
    }
    throw err;
  }
}
