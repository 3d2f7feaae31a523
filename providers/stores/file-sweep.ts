/**
 * What crashed writers leave in a file store, and its removal. A writer killed between creating
 * its temporary file and the rename (`kill -9`, a power cut) leaves the temporary file behind,
 * and a lock nobody contends for again stays too. `sweepStale` walks the store and removes
 * both: a temporary file (`.bootseal-tmp.<host>.<pid>.<random>`) when it is older than a bound
 * longer than any write takes, or when its writer is provably dead (this host, its pid gone); a
 * lock by the lock code's own staleness rule (file-lock.ts); a spare
 * (`.bootseal-spare.<host>.<pid>.<random>`, file-spares.ts) two hours after it became one, or
 * when its writer is provably dead. Nothing else is touched (objects, files of other programs,
 * the fetcher's `.NAME.bootseal-keep-*.tmp`).
 */
import { createHash } from "node:crypto";
import { readdir, rmdir, stat } from "node:fs/promises";
import { hostname } from "node:os";
import { dirname, join, sep } from "node:path";
import { TEMP_SUFFIX_PATTERN } from "../../src/files/atomic-write.ts";
import { errno, fsError } from "./file-errors.ts";
import { type KeyLocks, LOCK_PREFIX, processGone, removed } from "./file-lock.ts";
import { SPARE_POOL_MS } from "./file-spares.ts";
import { RESERVED_SEGMENT_PREFIX } from "./store-url.ts";

export const TEMP_PREFIX = `${RESERVED_SEGMENT_PREFIX}tmp.`;
/** A replaced version kept as a writer's next temporary file (file-spares.ts). */
export const SPARE_PREFIX = `${RESERVED_SEGMENT_PREFIX}spare.`;
/** This host, as it appears in temporary file names (short, any host name fits). */
export const HOST_TAG = createHash("sha256").update(hostname()).digest("hex").slice(0, 8);
/** `<prefix><host>.<pid>.<random>`: the names a writer gives its files, host and pid captured. */
const writerFileName = (prefix: string) =>
  new RegExp(`^${prefix.replaceAll(".", "\\.")}([0-9a-f]{8})\\.([0-9]{1,10})\\.${TEMP_SUFFIX_PATTERN}$`);
/** `.bootseal-tmp.<host>.<pid>.<random>`; temporary files of older versions have no host and pid. */
export const TEMP_NAME = writerFileName(TEMP_PREFIX);
/** `.bootseal-spare.<host>.<pid>.<random>` (file-spares.ts). */
const SPARE_NAME = writerFileName(SPARE_PREFIX);

/** Default age after which a temporary file is abandoned: far longer than any write takes. */
export const STALE_TEMP_MS = 15 * 60_000;
/** Age (since it became one) after which a spare is removed: twice what its pool keeps it. */
export const STALE_SPARE_MS = 2 * SPARE_POOL_MS;

export interface SweepResult {
  /** Temporary files removed. */
  readonly tempFiles: number;
  /** Abandoned lock (and lock-break) files removed. */
  readonly locks: number;
}

export interface SweepOptions {
  /** Temporary files older than this are removed (default STALE_TEMP_MS). */
  readonly olderThanMs?: number;
  /** Spares older than this (by ctime: when they became spares) are removed (default STALE_SPARE_MS). */
  readonly spareOlderThanMs?: number;
  readonly signal?: AbortSignal;
}

/** FileStore.sweepStale: walks the store under `root`; `locks` judges and removes its locks. */
export async function sweepStale(root: string, locks: KeyLocks, options: SweepOptions): Promise<SweepResult> {
  const olderThanMs = options.olderThanMs ?? STALE_TEMP_MS;
  const spareOlderThanMs = options.spareOlderThanMs ?? STALE_SPARE_MS;
  let tempFiles = 0;
  let lockFiles = 0;
  const dirs = [root];
  for (let dir = dirs.pop(); dir !== undefined; dir = dirs.pop()) {
    options.signal?.throwIfAborted();
    let entries: import("node:fs").Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      const code = errno(err);
      if (code === "ENOENT" || code === "ENOTDIR") continue;
      throw fsError(err, "list the store");
    }
    // Break locks first: a crashed breaker's leftover would otherwise keep its lock this round.
    const breaksFirst = (e: import("node:fs").Dirent) => (e.name.endsWith(".break") ? 0 : 1);
    entries.sort((a, b) => breaksFirst(a) - breaksFirst(b));
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        dirs.push(path);
        continue;
      }
      if (!e.isFile() || !e.name.startsWith(RESERVED_SEGMENT_PREFIX)) continue;
      if (e.name.startsWith(TEMP_PREFIX)) {
        if ((await isLeftOver(path, TEMP_NAME.exec(e.name), "mtimeMs", olderThanMs)) && (await removed(path)))
          tempFiles++;
      } else if (e.name.startsWith(SPARE_PREFIX)) {
        if (
          (await isLeftOver(path, SPARE_NAME.exec(e.name), "ctimeMs", spareOlderThanMs)) &&
          (await removed(path))
        )
          tempFiles++;
      } else if (e.name.startsWith(LOCK_PREFIX)) {
        if (await locks.sweepLock(path, e.name)) lockFiles++;
      }
    }
  }
  return { tempFiles, locks: lockFiles };
}

/**
 * A writer's file (temporary or spare) is left over when it is `olderThanMs` old by `clock` (a
 * temporary file's mtime; a spare's ctime, which link(2) set when it became one), or when its
 * name (`named`, the name rule's match) says this host and its writer's pid no longer runs.
 */
async function isLeftOver(
  path: string,
  named: RegExpExecArray | null,
  clock: "mtimeMs" | "ctimeMs",
  olderThanMs: number,
): Promise<boolean> {
  const st = await stat(path).catch(() => null);
  if (!st?.isFile()) return false;
  // A bound of 0 means every one: a file made this millisecond has a ctime/mtime with a
  // fraction past Date.now()'s whole millisecond, so the difference alone can be negative.
  if (olderThanMs <= 0 || Date.now() - st[clock] >= olderThanMs) return true;
  if (!named || named[1] !== HOST_TAG) return false;
  const pid = Number(named[2]);
  // Only its writer renames or reuses such a file; a dead writer never will. A reused pid
  // looks alive, which only keeps the file until it is old enough.
  return pid !== process.pid && pid > 0 && processGone(pid);
}

/** After a delete, removes directories left empty, up to (not including) the store `root`. */
export async function pruneEmptyDirs(root: string, dir: string): Promise<void> {
  for (let d = dir; d.startsWith(root + sep); d = dirname(d)) {
    try {
      await rmdir(d); // fails on a non-empty directory, which is the point
    } catch {
      return;
    }
  }
}
