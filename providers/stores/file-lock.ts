/**
 * The file store's per-key locks. Conditional writes and deletes must hold against other
 * PROCESSES on the same directory (two `bootseal serve` replicas on one volume), so every
 * mutation of a key runs under a per-key lock file created with O_CREAT|O_EXCL
 * (`open(path, "wx")`), which is atomic on local file systems and NFSv3+. Inside the lock:
 * check the condition, write, rename. The lock holds `{pid, host, token}` (the token tells two
 * locks of one process apart); a lock is stale when
 * its owner is on this host and no longer runs, or when it is older than `staleLockMs` (a crash
 * on another host, or an unreadable lock). Stale locks are removed under a second "break" lock,
 * and only if unchanged since they were judged stale, so two processes breaking the same lock
 * cannot remove each other's fresh lock. The holder keeps its lock file open and unlocks by
 * checking that the file is still linked (fstat: a broken lock has no link left) before
 * removing it: three calls, where reading the lock back took five. Lock files start with
 * `.bootseal-` (a reserved key segment); listing skips them.
 *
 * Where the file system has hard links, a lock is not a new file but a new name (`link(2)`,
 * as atomic as O_EXCL) for this process's owner file, `.bootseal-lock.owner.<pid>.<random>` in
 * the store root, which holds the same `{pid, host, token}` and whose mtime is refreshed before
 * each lock is taken (so a lock's age, read by stat, is never older than the lock). Any
 * version's lock code reads such a lock as it reads a lock file; the sweep judges an owner file
 * by the same rule. Why: every lock file was an inode allocated and freed, and on ext4 without
 * a journal each allocation passes over every inode freed in the last minute (up to six)
 * (`recently_deleted`): in a boot storm that was most of the service's CPU (issue #33). Taking
 * the lock by name also needs one process to hold a key's lock at most once at a time (the
 * unlock recognises its lock by the owner's inode), so this process's writers of one key queue
 * in memory first.
 */
import { createHash, randomBytes } from "node:crypto";
import { link, lstat, mkdir, open, readFile, stat, unlink, utimes } from "node:fs/promises";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { BootsealError } from "../../src/errors.ts";
import { closeFd, fstatFd, openFd, writeAllFd } from "../../src/files/fd.ts";
import { errno, fsError } from "./file-errors.ts";
import { RESERVED_SEGMENT_PREFIX, validateKey } from "./store-url.ts";

/** Lock tokens: unique per lock of this process (a random part per process, then a counter). */
const TOKEN_PREFIX = randomBytes(8).toString("hex");
let tokenCounter = 0;

export const LOCK_PREFIX = `${RESERVED_SEGMENT_PREFIX}lock.`;

let host: string | undefined;

/**
 * This host's name, asked once: every lock names it, and os.hostname() is a system call (2 %
 * of the service's CPU in a file-store storm). A host renamed while running marks its locks
 * with the old name: they then look foreign, and only their age breaks them (safe).
 */
function thisHost(): string {
  host ??= hostname();
  return host;
}

/** This process's owner file (hard-link locks), and when its mtime was last set. */
interface OwnerFile {
  readonly path: string;
  readonly ino: number;
  refreshedAt: number;
}

/** link(2) errors that mean: no hard links here (or none more for this inode). */
const NO_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "EXDEV", "ENOSYS"]);

/** The lock file of a key: hashed, so a 255-byte file name still gets a lock name that fits. */
export function lockPathOf(dir: string, key: string): string {
  const segments = validateKey(key).split("/");
  const name = segments.pop()!;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 32);
  return join(dir, ...segments, `${LOCK_PREFIX}${hash}`);
}

interface LockOwner {
  readonly pid: number;
  readonly host: string;
  readonly token: string;
}

/** True when this call removed the file (false when it was already gone). */
export async function removed(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (err) {
    if (errno(err) === "ENOENT") return false;
    throw fsError(err, "remove a stale file");
  }
}

export function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return errno(err) === "ESRCH"; // EPERM: it runs, under another user
  }
}

/** The locks of one store directory. */
export class KeyLocks {
  readonly #root: string;
  readonly #lockTimeoutMs: number;
  readonly #staleLockMs: number;

  /** Hard-link locks: the owner file, undefined until the first lock; null: no links here. */
  #owner: Promise<OwnerFile> | undefined | null;
  /** Locks of this process being taken or held (the owner file lives while there are any). */
  #active = 0;
  /** Per lock path, the end of this process's queue for it. */
  readonly #queues = new Map<string, Promise<void>>();

  constructor(root: string, lockTimeoutMs: number, staleLockMs: number) {
    this.#root = root;
    this.#lockTimeoutMs = lockTimeoutMs;
    this.#staleLockMs = staleLockMs;
  }

  /** Runs `critical` holding the key's lock; creates the key's directory as needed. */
  async run<T>(key: string, signal: AbortSignal | undefined, critical: () => Promise<T>): Promise<T> {
    const lockPath = lockPathOf(this.#root, key);
    // One holder per key in this process (see the top): the others wait here, not on the file.
    const before = this.#queues.get(lockPath);
    let done!: () => void;
    const mine = new Promise<void>((resolve) => {
      done = resolve;
    });
    const end = before ? before.then(() => mine) : mine;
    this.#queues.set(lockPath, end);
    try {
      if (before) await before;
      this.#active++;
      try {
        return await this.#runLocked(lockPath, signal, critical);
      } finally {
        if (--this.#active === 0) await this.#dropOwnerFile();
      }
    } finally {
      done();
      if (this.#queues.get(lockPath) === end) this.#queues.delete(lockPath);
    }
  }

  /**
   * No lock taken or held: the owner file goes too (a store holds nothing of a process that is
   * not writing). Under load some lock is nearly always held, so it lives through the storm.
   */
  async #dropOwnerFile(): Promise<void> {
    const owner = this.#owner;
    if (!owner) return;
    this.#owner = undefined;
    const path = await owner.then(
      (f) => f.path,
      () => undefined,
    );
    if (path !== undefined) await unlink(path).catch(() => {});
  }

  async #runLocked<T>(
    lockPath: string,
    signal: AbortSignal | undefined,
    critical: () => Promise<T>,
  ): Promise<T> {
    const owner: LockOwner = {
      pid: process.pid,
      host: thisHost(),
      token: `${TOKEN_PREFIX}.${++tokenCounter}`,
    };
    const deadline = Date.now() + this.#lockTimeoutMs;
    let lockFd: number | undefined;
    let linkedIno: number | undefined;
    for (let attempt = 0; lockFd === undefined && linkedIno === undefined; attempt++) {
      signal?.throwIfAborted();
      try {
        const file = await this.#ownerFile();
        if (file === null) lockFd = await openFd(lockPath, "wx", 0o600);
        else {
          if (Date.now() - file.refreshedAt > 1000) {
            const now = new Date();
            await utimes(file.path, now, now);
            file.refreshedAt = now.getTime();
          }
          await link(file.path, lockPath);
          linkedIno = file.ino;
        }
      } catch (err) {
        const code = errno(err);
        if (code === "ENOENT") {
          // The directory is missing, a delete pruned it since, or a sweep took the owner file
          // (a sweep elsewhere judges it by age): (re)create and try again.
          if (this.#owner) {
            const ownerPath = await this.#owner.then(
              (f) => f.path,
              () => undefined,
            );
            if (ownerPath !== undefined && !(await stat(ownerPath).catch(() => null)))
              this.#owner = undefined;
          }
          await mkdir(dirname(lockPath), { recursive: true, mode: 0o700 }).catch((e) => {
            throw fsError(e, "create a directory");
          });
          continue;
        }
        if (this.#owner && code !== undefined && NO_LINKS.has(code)) {
          this.#owner = null; // lock files from now on
          continue;
        }
        if (code === "EMLINK") {
          this.#owner = undefined; // this owner file has all the names it can have: a new one
          continue;
        }
        if (code !== "EEXIST") throw fsError(err, "lock an object");
        if (await this.breakIfStale(lockPath)) continue;
        if (Date.now() > deadline) {
          throw new BootsealError(
            "STORE_UNAVAILABLE",
            "file store: timed out waiting for another writer's lock",
          );
        }
        // Jittered backoff from 2 ms to 50 ms: writers hold the lock for a few fsyncs.
        const wait = Math.min(50, 2 * 1.5 ** attempt) * (0.5 + Math.random());
        await sleep(wait, undefined, { signal });
      }
    }
    if (linkedIno !== undefined) {
      try {
        return await critical();
      } finally {
        await this.#unlink(lockPath, linkedIno);
      }
    }
    if (lockFd === undefined) throw new Error("unreachable: the loop ends with a lock");
    try {
      await writeAllFd(lockFd, Buffer.from(JSON.stringify(owner)));
    } catch (err) {
      // A full disk (ENOSPC) fails the write after the create: the empty lock is ours,
      // remove it, or every writer of this key would wait for it to turn stale.
      await closeFd(lockFd).catch(() => {});
      await unlink(lockPath).catch(() => {});
      throw fsError(err, "lock an object");
    }
    try {
      return await critical();
    } finally {
      await this.#unlock(lockPath, lockFd);
    }
  }

  /**
   * This process's owner file, made on first use: created, written and closed before any lock
   * names it, so a reader never sees it empty. null when the store has no hard links (probed by
   * the first link, which then falls back to lock files).
   */
  #ownerFile(): Promise<OwnerFile> | null {
    if (this.#owner === null) return null;
    this.#owner ??= (async () => {
      const path = join(this.#root, `${LOCK_PREFIX}owner.${process.pid}.${randomBytes(6).toString("hex")}`);
      const content = JSON.stringify({ pid: process.pid, host: thisHost(), token: `${TOKEN_PREFIX}.owner` });
      await mkdir(this.#root, { recursive: true, mode: 0o700 });
      const fd = await openFd(path, "wx", 0o600);
      try {
        await writeAllFd(fd, Buffer.from(content));
        return { path, ino: (await fstatFd(fd)).ino, refreshedAt: Date.now() };
      } catch (err) {
        await unlink(path).catch(() => {}); // e.g. a full disk: no empty owner file left
        throw err;
      } finally {
        await closeFd(fd);
      }
    })();
    const made = this.#owner;
    made.catch(() => {
      if (this.#owner === made) this.#owner = undefined; // e.g. a full disk: try again next time
    });
    return made;
  }

  /** Removes our lock name, if it still is ours (a broken lock's name may be someone else's now). */
  async #unlink(lockPath: string, ino: number): Promise<void> {
    try {
      if ((await lstat(lockPath)).ino === ino) await unlink(lockPath);
    } catch {
      // Gone already (broken as stale): nothing of ours to remove.
    }
  }

  async #unlock(lockPath: string, fd: number): Promise<void> {
    // Remove only our own lock: if ours was judged stale and broken, it has no link left and
    // the file at the path (if any) is someone else's.
    try {
      if ((await fstatFd(fd)).nlink > 0) await unlink(lockPath).catch(() => {});
    } catch {
      // fstat of our own open descriptor does not fail; if it did, the lock turns stale
    } finally {
      await closeFd(fd).catch(() => {});
    }
  }

  /**
   * For the sweep: removes a lock file (`name` in `path`) that is abandoned, a lock by the
   * staleness rule under its break lock, a break lock once older than the stale age. True
   * when this call removed it.
   */
  async sweepLock(path: string, name: string): Promise<boolean> {
    if (name.endsWith(".break")) {
      const st = await stat(path).catch(() => null);
      return Boolean(st && Date.now() - st.mtimeMs > this.#staleLockMs && (await removed(path)));
    }
    return Boolean((await this.#inspectLock(path))?.stale && (await this.breakIfStale(path)));
  }

  /** True when the lock was stale and is now gone (or vanished on its own). */
  async breakIfStale(lockPath: string): Promise<boolean> {
    const seen = await this.#inspectLock(lockPath);
    if (seen === null) return true;
    if (!seen.stale) return false;
    const breaker = `${lockPath}.break`;
    try {
      await (await open(breaker, "wx", 0o600)).close();
    } catch (err) {
      if (errno(err) !== "EEXIST") throw fsError(err, "lock an object");
      // Another process is breaking it. A break lock left by a crash in that short window is
      // itself removed once it is older than the stale age.
      const st = await stat(breaker).catch(() => null);
      if (st && Date.now() - st.mtimeMs > this.#staleLockMs) await unlink(breaker).catch(() => {});
      return false;
    }
    try {
      const again = await this.#inspectLock(lockPath);
      if (again === null) return true;
      if (again.stale && again.content === seen.content && again.ino === seen.ino) await unlink(lockPath);
      return true;
    } catch (err) {
      if (errno(err) === "ENOENT") return true;
      throw fsError(err, "break a stale lock");
    } finally {
      await unlink(breaker).catch(() => {});
    }
  }

  async #inspectLock(lockPath: string): Promise<{ stale: boolean; content: string; ino: number } | null> {
    let st: import("node:fs").Stats;
    let content: string;
    try {
      st = await stat(lockPath);
      content = await readFile(lockPath, "utf8");
    } catch (err) {
      if (errno(err) === "ENOENT") return null;
      throw fsError(err, "read a lock");
    }
    if (Date.now() - st.mtimeMs > this.#staleLockMs) return { stale: true, content, ino: st.ino };
    let owner: Partial<LockOwner> = {};
    try {
      owner = JSON.parse(content) as Partial<LockOwner>;
    } catch {
      // Empty or partial: its writer is between open and write, or crashed there (age decides).
    }
    const gone = owner.host === thisHost() && typeof owner.pid === "number" && processGone(owner.pid);
    return { stale: gone, content, ino: st.ino };
  }
}
