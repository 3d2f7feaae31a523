/**
 * file://DIR: the embedded default store. Object `a/b/c` is the file DIR/a/b/c (0600, in
 * directories created 0700), so an operator can read the store with ls and cat.
 *
 * Writes are atomic (src/files/atomic-write.ts): a temporary file in the target directory, fsync, rename over the target,
 * fsync the directory. Readers never lock: a rename is atomic, so they see the old or the new
 * bytes, never a mix. The etag is the SHA-256 of the content, computed from the bytes read.
 *
 * Conditional writes and deletes must hold against other PROCESSES on the same directory (two
 * `bootseal serve` replicas on one volume), so every mutation of a key runs under a per-key
 * lock file created with O_CREAT|O_EXCL (`open(path, "wx")`), which is atomic on local file
 * systems and NFSv3+. Inside the lock: check the condition, write, rename. The lock holds
 * `{pid, host, token}`; a lock is stale when its owner is on this host and no longer runs, or
 * when it is older than `staleLockMs` (a crash on another host, or an unreadable lock). Stale
 * locks are removed under a second "break" lock, and only if unchanged since they were judged
 * stale, so two processes breaking the same lock cannot remove each other's fresh lock.
 * Temporary and lock files start with `.bootseal-` (a reserved key segment); listing skips them.
 *
 * A writer killed between creating its temporary file and the rename (`kill -9`, a power cut)
 * leaves the temporary file behind, and a lock nobody contends for again stays too.
 * `sweepStale` walks the store and removes both: a temporary file (`.bootseal-tmp.<host>.<pid>.<random>`)
 * when it is older than a bound longer than any write takes, or when its writer is provably
 * dead (this host, its pid gone); a lock by the lock code's own staleness rule. Nothing else is
 * touched (objects, files of other programs, the fetcher's `.NAME.bootseal-keep-*.tmp`).
 */
import { createHash, randomBytes } from "node:crypto";
import type { FileHandle } from "node:fs/promises";
import { mkdir, open, readdir, readFile, rmdir, stat, unlink } from "node:fs/promises";
import { hostname } from "node:os";
import { dirname, join, resolve, sep } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { CallOptions } from "../../src/call-options.ts";
import { BootsealError } from "../../src/errors.ts";
import { syncDirectory, writeFileAtomic } from "../../src/files/atomic-write.ts";
import type { GetOptions, ObjectInfo, ObjectStore, StoredObject, WriteCondition } from "./object-store.ts";
import {
  compareKeys,
  etagValue,
  type FileLocation,
  isValidKey,
  RESERVED_SEGMENT_PREFIX,
  type StoreSchemeType,
  usage,
  validateKey,
  validateListPrefix,
} from "./store-url.ts";

export interface FileStoreOptions {
  /** How long a writer waits for another writer's lock before STORE_UNAVAILABLE (default 45 s). */
  readonly lockTimeoutMs?: number;
  /** Age after which any lock counts as abandoned (default 30 s; a write holds it for milliseconds). */
  readonly staleLockMs?: number;
}

const LOCK_PREFIX = `${RESERVED_SEGMENT_PREFIX}lock.`;
const TEMP_PREFIX = `${RESERVED_SEGMENT_PREFIX}tmp.`;
/** This host, as it appears in temporary file names (short, any host name fits). */
const HOST_TAG = createHash("sha256").update(hostname()).digest("hex").slice(0, 8);
/** `.bootseal-tmp.<host>.<pid>.<random>`; temporary files of older versions have no host and pid. */
const TEMP_NAME = /^\.bootseal-tmp\.([0-9a-f]{8})\.([0-9]{1,10})\.[0-9a-f]+$/;

/** Default age after which a temporary file is abandoned: far longer than any write takes. */
export const STALE_TEMP_MS = 15 * 60_000;

export interface SweepResult {
  /** Temporary files removed. */
  readonly tempFiles: number;
  /** Abandoned lock (and lock-break) files removed. */
  readonly locks: number;
}

/** The lock file of a key: hashed, so a 255-byte file name still gets a lock name that fits. */
export function lockPathOf(dir: string, key: string): string {
  const segments = validateKey(key).split("/");
  const name = segments.pop()!;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 32);
  return join(dir, ...segments, `${LOCK_PREFIX}${hash}`);
}

function contentEtag(body: Uint8Array): string {
  return `"${createHash("sha256").update(body).digest("hex")}"`;
}

function errno(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err ? String(err.code) : undefined;
}

function lostRace(message: string): BootsealError {
  return new BootsealError("PRECONDITION_FAILED", message);
}

/** File-system failures as store errors; the path is not shown (it reveals the layout only). */
function fsError(err: unknown, action: string): BootsealError {
  if (err instanceof BootsealError) return err;
  const code = errno(err);
  if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
    return new BootsealError("STORE_FORBIDDEN", `file store: permission denied to ${action}`, { cause: err });
  }
  if (code === "ENAMETOOLONG") {
    return new BootsealError("BAD_INPUT", "file store: a key segment is too long for the file system", {
      cause: err,
    });
  }
  if (code === "ENOTDIR" || code === "EISDIR" || code === "EEXIST") {
    // S3 lets `a` and `a/b` both be objects; a file system cannot have `a` as file and directory.
    return new BootsealError(
      "BAD_INPUT",
      "file store: the key collides with a directory or a file on its path",
      {
        cause: err,
      },
    );
  }
  if (code === "ENOSPC" || code === "EDQUOT" || code === "EIO" || code === "EMFILE" || code === "ENFILE") {
    return new BootsealError("STORE_UNAVAILABLE", `file store: cannot ${action} (${code})`, { cause: err });
  }
  return new BootsealError("IO_ERROR", `file store: cannot ${action}`, { cause: err });
}

interface ReadResult {
  readonly body: Buffer;
  readonly mtime: Date;
}

function tooLarge(maxBytes: number): BootsealError {
  return new BootsealError("TOO_LARGE", `file store: the object is larger than ${maxBytes} bytes`);
}

/** At most maxBytes of an open file (stat first, then a read that stops at the cap). */
async function readCapped(fh: FileHandle, size: number, maxBytes: number): Promise<Buffer> {
  if (size > maxBytes) throw tooLarge(maxBytes);
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    // The stat size (plus one byte, to see the end), in reads of at most 1 MiB.
    const want = Math.max(size - total + 1, 64 * 1024);
    const chunk = Buffer.allocUnsafe(Math.min(1 << 20, maxBytes - total + 1, want));
    const { bytesRead } = await fh.read(chunk, 0, chunk.length, null);
    if (bytesRead === 0) return Buffer.concat(chunks, total);
    total += bytesRead;
    if (total > maxBytes) throw tooLarge(maxBytes); // it grew after the stat
    chunks.push(chunk.subarray(0, bytesRead));
  }
}

/** Reads an object file; null when there is none (missing, or a directory on the way). */
async function readObject(path: string, maxBytes?: number): Promise<ReadResult | null> {
  let fh: FileHandle | undefined;
  try {
    fh = await open(path, "r");
    const st = await fh.stat();
    if (!st.isFile()) return null;
    const body = maxBytes === undefined ? await fh.readFile() : await readCapped(fh, st.size, maxBytes);
    return { body, mtime: st.mtime };
  } catch (err) {
    if (err instanceof BootsealError) throw err;
    const code = errno(err);
    if (code === "ENOENT" || code === "ENOTDIR" || code === "EISDIR") return null;
    throw fsError(err, "read an object");
  } finally {
    await fh?.close();
  }
}

interface LockOwner {
  readonly pid: number;
  readonly host: string;
  readonly token: string;
}

/** True when this call removed the file (false when it was already gone). */
async function removed(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (err) {
    if (errno(err) === "ENOENT") return false;
    throw fsError(err, "remove a stale file");
  }
}

function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return errno(err) === "ESRCH"; // EPERM: it runs, under another user
  }
}

export class FileStore implements ObjectStore {
  readonly url: string;
  readonly #root: string;
  readonly #lockTimeoutMs: number;
  readonly #staleLockMs: number;

  constructor(dir: string, options: FileStoreOptions = {}) {
    this.#root = dir;
    this.url = `file://${dir}`;
    this.#lockTimeoutMs = options.lockTimeoutMs ?? 45_000;
    this.#staleLockMs = options.staleLockMs ?? 30_000;
  }

  /** The file of a key; validated keys cannot climb out, and the check makes sure of it. */
  #path(key: string): string {
    const path = join(this.#root, ...validateKey(key).split("/"));
    if (!path.startsWith(this.#root + sep)) throw new BootsealError("BAD_INPUT", "invalid object key");
    return path;
  }

  async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    options?.signal?.throwIfAborted();
    const read = await readObject(this.#path(key), options?.maxBytes);
    if (!read) return null;
    const body = new Uint8Array(read.body.buffer, read.body.byteOffset, read.body.byteLength);
    return { key, etag: contentEtag(body), size: body.byteLength, lastModified: read.mtime, body };
  }

  async head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    options?.signal?.throwIfAborted();
    const read = await readObject(this.#path(key));
    if (!read) return null;
    return { key, etag: contentEtag(read.body), size: read.body.byteLength, lastModified: read.mtime };
  }

  async put(
    key: string,
    body: Uint8Array,
    condition: WriteCondition,
    options?: CallOptions & { contentType?: string },
  ): Promise<ObjectInfo> {
    options?.signal?.throwIfAborted();
    const path = this.#path(key);
    const bytes = Uint8Array.from(body); // the caller may reuse its buffer while we wait
    return this.#locked(key, options?.signal, async () => {
      if (!("unconditional" in condition)) {
        const current = await readObject(path);
        if ("ifNoneMatch" in condition && current) throw lostRace("object already exists");
        if (
          "ifMatch" in condition &&
          (!current || etagValue(contentEtag(current.body)) !== etagValue(condition.ifMatch))
        ) {
          throw lostRace("object changed since it was read");
        }
      }
      await this.#writeAtomic(path, bytes);
      const st = await stat(path).catch((err) => {
        throw fsError(err, "write an object");
      });
      return { key, etag: contentEtag(bytes), size: bytes.byteLength, lastModified: st.mtime };
    });
  }

  async delete(key: string, condition?: { ifMatch: string }, options?: CallOptions): Promise<boolean> {
    options?.signal?.throwIfAborted();
    const path = this.#path(key);
    if (!(await readObject(path))) return false; // nothing there: no lock, no directories made
    const deleted = await this.#locked(key, options?.signal, async () => {
      const current = await readObject(path);
      if (!current) return false;
      if (condition && etagValue(contentEtag(current.body)) !== etagValue(condition.ifMatch)) {
        throw lostRace("object changed since it was read");
      }
      try {
        await unlink(path);
        await syncDirectory(dirname(path));
      } catch (err) {
        if (errno(err) === "ENOENT") return false;
        throw fsError(err, "delete an object");
      }
      return true;
    });
    if (deleted) await this.#pruneEmptyDirs(dirname(path));
    return deleted;
  }

  async *list(prefix: string, options?: CallOptions): AsyncIterable<ObjectInfo> {
    validateListPrefix(prefix);
    // Walk only the deepest directory the prefix names; the rest of it filters names there.
    const cut = prefix.lastIndexOf("/") + 1;
    const dirKey = prefix.slice(0, cut);
    const start = dirKey ? join(this.#root, ...dirKey.slice(0, -1).split("/")) : this.#root;
    yield* this.#walk(start, dirKey, prefix.slice(cut), options?.signal);
  }

  async *#walk(
    dir: string,
    keyPrefix: string,
    namePrefix: string,
    signal?: AbortSignal,
  ): AsyncIterable<ObjectInfo> {
    signal?.throwIfAborted();
    let entries: import("node:fs").Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      const code = errno(err);
      if (code === "ENOENT" || code === "ENOTDIR") return;
      throw fsError(err, "list objects");
    }
    // Sort as full keys sort: a directory `a` holds keys `a/...`, so it sorts as "a/", which
    // puts it after a sibling file `a-b` ('-' < '/'), matching S3's and GCS's byte order.
    const items = entries
      .filter((e) => !e.name.startsWith(RESERVED_SEGMENT_PREFIX) && e.name.startsWith(namePrefix))
      .filter((e) => e.isDirectory() || e.isFile())
      .map((e) => ({
        name: e.name,
        isDir: e.isDirectory(),
        sortKey: e.isDirectory() ? `${e.name}/` : e.name,
      }))
      .sort((a, b) => compareKeys(a.sortKey, b.sortKey));
    for (const item of items) {
      const key = keyPrefix + item.name;
      if (item.isDir) {
        yield* this.#walk(join(dir, item.name), `${key}/`, "", signal);
        continue;
      }
      if (!isValidKey(key)) continue; // a file put there by hand that no key can name
      const read = await readObject(join(dir, item.name));
      if (!read) continue; // deleted since readdir
      yield { key, etag: contentEtag(read.body), size: read.body.byteLength, lastModified: read.mtime };
    }
  }

  async #writeAtomic(path: string, body: Uint8Array): Promise<void> {
    try {
      await writeFileAtomic(path, body, { tempPrefix: `${TEMP_PREFIX}${HOST_TAG}.${process.pid}.` });
    } catch (err) {
      // writeFileAtomic says IO_ERROR; the store maps the errno to its own codes (ENOSPC -> 503).
      throw fsError(
        err instanceof BootsealError && err.cause !== undefined ? err.cause : err,
        "write an object",
      );
    }
  }

  /** Runs `critical` holding the key's lock file; creates the key's directory as needed. */
  async #locked<T>(key: string, signal: AbortSignal | undefined, critical: () => Promise<T>): Promise<T> {
    const lockPath = lockPathOf(this.#root, key);
    const owner: LockOwner = { pid: process.pid, host: hostname(), token: randomBytes(16).toString("hex") };
    const deadline = Date.now() + this.#lockTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      signal?.throwIfAborted();
      try {
        const fh = await open(lockPath, "wx", 0o600);
        try {
          await fh.writeFile(JSON.stringify(owner));
        } catch (err) {
          // A full disk (ENOSPC) fails the write after the create: the empty lock is ours,
          // remove it, or every writer of this key would wait for it to turn stale.
          await fh.close().catch(() => {});
          await unlink(lockPath).catch(() => {});
          throw fsError(err, "lock an object");
        }
        await fh.close();
        break;
      } catch (err) {
        const code = errno(err);
        if (code === "ENOENT") {
          // The directory is missing, or a delete pruned it since: (re)create and try again.
          await mkdir(dirname(lockPath), { recursive: true, mode: 0o700 }).catch((e) => {
            throw fsError(e, "create a directory");
          });
          continue;
        }
        if (code !== "EEXIST") throw fsError(err, "lock an object");
        if (await this.#breakIfStale(lockPath)) continue;
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
    try {
      return await critical();
    } finally {
      await this.#unlock(lockPath, owner.token);
    }
  }

  async #unlock(lockPath: string, token: string): Promise<void> {
    // Remove only our own lock: if ours was judged stale and broken, the file is someone else's.
    const content = await readFile(lockPath, "utf8").catch(() => "");
    if (content.includes(token)) await unlink(lockPath).catch(() => {});
  }

  /** True when the lock was stale and is now gone (or vanished on its own). */
  async #breakIfStale(lockPath: string): Promise<boolean> {
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
    const gone = owner.host === hostname() && typeof owner.pid === "number" && processGone(owner.pid);
    return { stale: gone, content, ino: st.ino };
  }

  /**
   * Removes what crashed writers left in the store: temporary files older than `olderThanMs`
   * (default 15 min) or whose writer (this host, by pid) no longer runs, and locks that are
   * stale by the lock rule (owner gone, or older than `staleLockMs`). A live writer's files are
   * never touched: its temporary file is younger than the bound and its pid runs. Symbolic
   * links are not followed; files vanishing meanwhile are fine.
   */
  async sweepStale(options: { olderThanMs?: number; signal?: AbortSignal } = {}): Promise<SweepResult> {
    const olderThanMs = options.olderThanMs ?? STALE_TEMP_MS;
    let tempFiles = 0;
    let locks = 0;
    const dirs = [this.#root];
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
          if ((await this.#tempIsStale(path, e.name, olderThanMs)) && (await removed(path))) tempFiles++;
        } else if (e.name.startsWith(LOCK_PREFIX)) {
          if (e.name.endsWith(".break")) {
            const st = await stat(path).catch(() => null);
            if (st && Date.now() - st.mtimeMs > this.#staleLockMs && (await removed(path))) locks++;
          } else if ((await this.#inspectLock(path))?.stale && (await this.#breakIfStale(path))) {
            locks++;
          }
        }
      }
    }
    return { tempFiles, locks };
  }

  async #tempIsStale(path: string, name: string, olderThanMs: number): Promise<boolean> {
    const st = await stat(path).catch(() => null);
    if (!st?.isFile()) return false;
    if (Date.now() - st.mtimeMs >= olderThanMs) return true;
    const m = TEMP_NAME.exec(name);
    if (!m || m[1] !== HOST_TAG) return false;
    const pid = Number(m[2]);
    // Only its writer renames a temporary file; a dead writer never will. A reused pid looks
    // alive, which only keeps the file until it is old enough.
    return pid !== process.pid && pid > 0 && processGone(pid);
  }

  /** After a delete, removes directories left empty, up to (not including) the store root. */
  async #pruneEmptyDirs(dir: string): Promise<void> {
    for (let d = dir; d.startsWith(this.#root + sep); d = dirname(d)) {
      try {
        await rmdir(d); // fails on a non-empty directory, which is the point
      } catch {
        return;
      }
    }
  }
}

export function createFileStore(dir: string, options?: FileStoreOptions): ObjectStore {
  return new FileStore(dir, options);
}

/** `file://DIR`: DIR absolute or relative to `cwd`; `..` and the root are refused. */
function parseFileUrl(rest: string, cwd: string): FileLocation {
  if (rest === "")
    throw usage("file:// needs a directory, e.g. file://./data/store or file:///var/lib/bootseal");
  // Percent escapes are decoded, as in any file URL (`file:///tmp/a%20b` is `/tmp/a b`).
  let path: string;
  try {
    path = decodeURIComponent(rest);
  } catch {
    throw usage("malformed percent escape in a file:// store URL");
  }
  if (/[\u0000-\u001f\u007f]/.test(path)) throw usage("store URL contains control characters");
  // `.` is fine (file://./data/store is the embedded default); `..` would let a URL climb out
  // of the directory an operator thinks it names.
  if (path.split("/").includes("..")) throw usage("'..' is not allowed in a store URL");
  const dir = resolve(cwd, path);
  if (dir === sep || dir === resolve(sep)) throw usage("refusing the file system root as a store directory");
  return { scheme: "file", dir };
}

export const fileScheme: StoreSchemeType<"file", FileLocation, { readonly file?: FileStoreOptions }> = {
  scheme: "file",
  example: "file://DIR",
  parse: parseFileUrl,
  open: (location, options) => new FileStore(location.dir, options.file),
};
