/**
 * Replaced objects' inodes, kept as this process's next temporary files. A file store writes
 * every version to a new file and renames it over the object. ext4 then allocates an inode
 * per write and frees the replaced one; under a storm's thousands of writes a second its
 * allocator serialises the writers and scans past the inodes freed a moment ago
 * (docs/benchmarks.md, "Session 17": 2–5× the CPU of a write into a kept inode).
 *
 * So the version being replaced keeps a name, `.bootseal-spare.<host>.<pid>.<n>`, given by
 * link(2) just before the rename takes the object's name from it. The next write into that
 * directory truncates and rewrites that file instead of creating one, then renames it over
 * its own object: the same atomic replace, without a new inode.
 *
 * A spare holds an old version of an object of its directory, 0600 as it was. Only a
 * long-running writer that sweeps keeps them (`bootseal serve`: FileStore.keepSpares), never a
 * one-shot command (a `rotate` must not leave old versions behind). The pool drops spares
 * after SPARE_POOL_MS and all of them on close; the sweep (file-sweep.ts) removes those of
 * dead writers and any older than STALE_SPARE_MS (link(2) set their ctime when they became
 * spares).
 */
import { constants } from "node:fs";
import { link, rename, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { CREATE_FLAGS, syncDirectory, tempSuffix } from "../../src/files/atomic-write.ts";
import { closeFd, fchmodFd, fsyncFd, ftruncateFd, openFd, writeAllFd } from "../../src/files/fd.ts";

const REUSE_FLAGS = constants.O_WRONLY | constants.O_NOFOLLOW;

/** Spares one directory keeps at most (about a storm's writers in flight there). */
export const SPARES_PER_DIRECTORY = 256;
/** A spare not reused within this long is removed instead (an old version lingers no longer). */
export const SPARE_POOL_MS = 60 * 60_000;

interface Spare {
  readonly path: string;
  readonly since: number;
}

export class SpareInodes {
  readonly #byDir = new Map<string, Spare[]>();
  readonly #tempPrefix: string;
  readonly #sparePrefix: string;
  #counter = 0;

  /** `tempPrefix`, `sparePrefix`: the names' starts, with this host and process in them. */
  constructor(tempPrefix: string, sparePrefix: string) {
    this.#tempPrefix = tempPrefix;
    this.#sparePrefix = sparePrefix;
  }

  /** The newest spare of `dir`; older ones than SPARE_POOL_MS are removed on the way. */
  async #take(dir: string): Promise<string | undefined> {
    const list = this.#byDir.get(dir);
    if (list === undefined) return undefined;
    const spare = list.pop();
    if (spare === undefined) return undefined;
    if (list.length === 0) this.#byDir.delete(dir);
    if (Date.now() - spare.since < SPARE_POOL_MS) return spare.path;
    // The newest is too old, so all are: drop the directory's pool.
    list.push(spare);
    await this.drop(dir);
    return undefined;
  }

  /** Removes every spare of this pool (the service's close: a clean stop leaves none). */
  async dropAll(): Promise<void> {
    for (const dir of [...this.#byDir.keys()]) await this.drop(dir);
  }

  /** Removes `dir`'s spares (a delete is about to prune the directory if it is empty). */
  async drop(dir: string): Promise<void> {
    const list = this.#byDir.get(dir);
    if (list === undefined) return;
    this.#byDir.delete(dir);
    for (const s of list) await unlink(s.path).catch(() => {});
  }

  #room(dir: string): boolean {
    return (this.#byDir.get(dir)?.length ?? 0) < SPARES_PER_DIRECTORY;
  }

  #give(dir: string, path: string): void {
    const list = this.#byDir.get(dir);
    const spare = { path, since: Date.now() };
    if (list === undefined) this.#byDir.set(dir, [spare]);
    else list.push(spare);
  }

  /** An open, empty file in `dir` to write the next version into, and whether it is new. */
  async #openTemporary(dir: string): Promise<{ path: string; fd: number; fresh: boolean }> {
    const spare = await this.#take(dir);
    if (spare !== undefined) {
      let fd: number | undefined;
      try {
        fd = await openFd(spare, REUSE_FLAGS);
        await ftruncateFd(fd, 0);
        return { path: spare, fd, fresh: false };
      } catch {
        // Swept meanwhile (ENOENT) or unusable: a new file instead.
        if (fd !== undefined) await closeFd(fd).catch(() => {});
        await unlink(spare).catch(() => {});
      }
    }
    const path = join(dir, `${this.#tempPrefix}${tempSuffix(++this.#counter)}`);
    return { path, fd: await openFd(path, CREATE_FLAGS, 0o600), fresh: true };
  }

  /**
   * Replaces (or creates) `path` with `data` atomically and durably: written, fsynced, renamed
   * over the object, the directory fsynced. The caller holds the key's lock. `keepReplaced`:
   * the version this write replaces, if any, becomes a spare.
   */
  async write(path: string, data: Uint8Array, keepReplaced: boolean): Promise<void> {
    const dir = dirname(path);
    const tmp = await this.#openTemporary(dir);
    try {
      try {
        await writeAllFd(tmp.fd, data);
        if (tmp.fresh) await fchmodFd(tmp.fd, 0o600); // exactly 0600, whatever the umask
        await fsyncFd(tmp.fd);
      } finally {
        await closeFd(tmp.fd);
      }
      let kept: string | undefined;
      if (keepReplaced && this.#room(dir)) {
        const name = join(dir, `${this.#sparePrefix}${tempSuffix(++this.#counter)}`);
        // ENOENT: a new object, nothing to keep; EPERM/EMLINK: no (more) hard links here.
        kept = await link(path, name).then(
          () => name,
          () => undefined,
        );
      }
      try {
        await rename(tmp.path, path);
      } catch (err) {
        if (kept !== undefined) await unlink(kept).catch(() => {});
        throw err;
      }
      await syncDirectory(dir);
      if (kept !== undefined) this.#give(dir, kept);
    } catch (err) {
      await unlink(tmp.path).catch(() => {});
      throw err;
    }
  }
}
