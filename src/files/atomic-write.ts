/**
 * Writing one file so that a reader (or a crash) sees the old bytes or the new ones, never a
 * mix, and the new file is never visible with the wrong owner, mode or label: a temporary
 * file in the target directory (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600), write, fchown, fchmod
 * (after chown, which may clear set-id bits), fsync, SELinux label, then rename over the
 * target and fsync the directory so the rename itself survives a power cut.
 *
 * `writeResolved` takes a target the caller resolved (the fetcher's paths.ts: allowed roots
 * checked, links resolved) and re-checks, right before the rename, that the directory still
 * is the real directory it was: a link swapped in meanwhile fails the write instead of
 * redirecting it.
 *
 * The fetcher's files and the CLI's -i/--output go through writeFileAtomic. The file object
 * store takes the same steps in providers/stores/file-spares.ts (into a replaced version's
 * inode when it keeps one) with CREATE_FLAGS, tempSuffix and syncDirectory from here. Layer 0:
 * it imports only the foundation, so the providers can use it too.
 */
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { lstat, mkdir, realpath, rename, stat, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { BootsealError } from "../errors.ts";
import { closeFd, fchmodFd, fchownFd, fsyncFd, openFd, writeAllFd } from "./fd.ts";

/** Gives a file the security label (SELinux context) of a reference file; the fetcher's selinux.ts. */
export interface FileLabeler {
  label(file: string, reference: string): Promise<void>;
}

/** Where a resolved write goes (the fetcher's ResolvedTarget carries these and more). */
export interface WriteTarget {
  /** Host path of the target file. */
  readonly hostPath: string;
  /** Host path of the directory it goes in, as realpath gave it when resolved. */
  readonly hostDir: string;
  /** Host paths of directories to create first, outermost first. */
  readonly missingDirs: readonly string[];
}

export interface AtomicWriteOptions {
  /** Permission bits (default 0600). */
  readonly mode?: number;
  readonly uid?: number;
  readonly gid?: number;
  /** Labels the temporary file like the file it replaces, or its directory. */
  readonly labeler?: FileLabeler | null;
  /** Refuse the rename unless realpath(dirname) is still this. */
  readonly expectDir?: string;
  /**
   * One write of a batch (the CLI's --recursive runs): the directory goes into this set
   * instead of being fsynced, and the caller fsyncs each directory once (syncDirectory) when
   * the batch ends. Each file is still replaced atomically; only the renames of a batch cut
   * short by a crash may be lost (the old files stay).
   */
  readonly syncDirectoryLater?: Set<string>;
}

/** A new temporary file: created here and now, never through a link. */
export const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

function ioError(path: string, action: string, err: unknown): BootsealError {
  if (err instanceof BootsealError) return err;
  const code = (err as NodeJS.ErrnoException | null)?.code ?? "error";
  return new BootsealError("IO_ERROR", `cannot ${action} ${path} (${code})`, { cause: err });
}

async function fsyncDirectoryNow(dir: string): Promise<void> {
  const fd = await openFd(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fsyncFd(fd);
  } finally {
    await closeFd(fd);
  }
}

/**
 * One directory's fsyncs, shared (a group commit): a caller waits for an fsync that began
 * after it called, so what it changed in the directory before is covered, but every caller
 * that arrives while one fsync runs shares the single next one. A file store under load
 * renames hundreds of files into one directory (status/<ns>/) at once: one fsync each was
 * half of its fsyncs (docs/benchmarks.md, issue #33).
 */
class DirectorySync {
  readonly #dir: string;
  readonly #idle: () => void;
  #running: Promise<void> | undefined;
  #queued: Promise<void> | undefined;

  constructor(dir: string, idle: () => void) {
    this.#dir = dir;
    this.#idle = idle;
  }

  sync(): Promise<void> {
    if (this.#running === undefined) return this.#start();
    // The running fsync may have begun before the caller's change: the next one, shared.
    this.#queued ??= this.#running.then(ignore, ignore).then(() => {
      this.#queued = undefined;
      return this.#start();
    });
    return this.#queued;
  }

  #start(): Promise<void> {
    const run: Promise<void> = fsyncDirectoryNow(this.#dir).finally(() => {
      if (this.#running === run) this.#running = undefined;
      if (this.#running === undefined && this.#queued === undefined) this.#idle();
    });
    this.#running = run;
    return run;
  }
}

const ignore = () => {};
const directorySyncs = new Map<string, DirectorySync>();

/** fsync a directory, so a rename or a new entry in it is durable (concurrent callers share one). */
export function syncDirectory(dir: string): Promise<void> {
  let state = directorySyncs.get(dir);
  if (state === undefined) {
    const created = new DirectorySync(dir, () => {
      if (directorySyncs.get(dir) === created) directorySyncs.delete(dir);
    });
    state = created;
    directorySyncs.set(dir, state);
  }
  return state.sync();
}

/** Temporary names: random per process, then a counter (randomBytes per write was ~2 % of the service CPU in a file-store storm). */
const TEMP_TAG = randomBytes(6).toString("hex");
let tempCounter = 0;

/** The unique end of a temporary file's name: this process's tag, then a base-36 counter. */
export function tempSuffix(counter: number): string {
  return `${TEMP_TAG}${counter.toString(36)}`;
}

/** Every name tempSuffix makes, as a regular expression source (a sweep recognises them by it). */
export const TEMP_SUFFIX_PATTERN = "[0-9a-z]+";

/** Atomically writes `data` to `path` (an existing directory's child). */
export async function writeFileAtomic(
  path: string,
  data: Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<void> {
  const dir = dirname(path);
  const mode = options.mode ?? 0o600;
  // Short enough for NAME_MAX (255) whatever the target's name; unique in this process, and
  // O_EXCL refuses any file already there.
  const random = tempSuffix(++tempCounter);
  const tmp = join(dir, `.${basename(path).slice(0, 200)}.bootseal-${random}.tmp`);
  let created = false;
  try {
    const fd = await openFd(tmp, CREATE_FLAGS, 0o600);
    created = true;
    try {
      await writeAllFd(fd, data);
      if (options.uid !== undefined || options.gid !== undefined) {
        await fchownFd(fd, options.uid ?? -1, options.gid ?? -1);
      }
      await fchmodFd(fd, mode);
      await fsyncFd(fd);
    } finally {
      await closeFd(fd);
    }
    if (options.labeler) {
      const existing = await lstat(path).catch(() => null);
      await options.labeler.label(tmp, existing?.isFile() ? path : dir);
    }
    if (options.expectDir !== undefined && (await realpath(dir)) !== options.expectDir) {
      throw new BootsealError("PATH_NOT_ALLOWED", `refusing to write ${path}: its directory moved`);
    }
    await rename(tmp, path);
    created = false;
    if (options.syncDirectoryLater) options.syncDirectoryLater.add(dir);
    else await syncDirectory(dir);
  } catch (err) {
    if (created) await unlink(tmp).catch(() => {});
    throw ioError(path, "write", err);
  }
}

/** A directory this writer creates: what cloud-init's makedirs makes under its umask 022. */
export const NEW_DIRECTORY_MODE = 0o755;

/**
 * Creates the missing directories of a resolved target one level at a time (never through a
 * link: mkdir fails on anything already there, which is then checked to be a real directory),
 * fsyncing each parent. Each new directory gets exactly NEW_DIRECTORY_MODE whatever this
 * process's umask: the fetcher runs under the unit's UMask=0077 so its own secrets are 0600,
 * but /etc/kubernetes or /opt/… made for a payload must come out as cloud-init makes them.
 */
export async function makeDirectories(missing: readonly string[]): Promise<void> {
  for (const dir of missing) {
    try {
      await mkdir(dir, { mode: NEW_DIRECTORY_MODE });
      await chmodNewDirectory(dir);
      await syncDirectory(dirname(dir));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw ioError(dir, "create directory", err);
      const info = await lstat(dir);
      if (!info.isDirectory())
        throw new BootsealError("PATH_NOT_ALLOWED", `refusing to write under ${dir}: not a directory`);
    }
  }
}

/** chmod through a descriptor opened without following links: the mode reaches the directory just made, never a link put in its place. */
async function chmodNewDirectory(dir: string): Promise<void> {
  if (constants.O_DIRECTORY === undefined) return; // Windows: no POSIX modes
  const fd = await openFd(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    await fchmodFd(fd, NEW_DIRECTORY_MODE);
  } finally {
    await closeFd(fd);
  }
}

/** Writes a resolved target, creating its missing directories first. */
export async function writeResolved(
  target: WriteTarget,
  data: Uint8Array,
  options: Omit<AtomicWriteOptions, "expectDir"> = {},
): Promise<void> {
  await makeDirectories(target.missingDirs);
  await writeFileAtomic(target.hostPath, data, { ...options, expectDir: target.hostDir });
}

/**
 * Replaces `path` atomically for the CLI (-i, --output, updatekeys): an existing file keeps
 * its mode, as sops -i does; a new one gets 0600 because it may hold plaintext.
 */
export async function replaceFile(
  path: string,
  data: Uint8Array,
  batch: Pick<AtomicWriteOptions, "syncDirectoryLater"> = {},
): Promise<void> {
  const mode = await stat(path).then(
    (info) => info.mode & 0o777,
    () => 0o600,
  );
  await writeFileAtomic(path, data, { mode, ...batch });
}
