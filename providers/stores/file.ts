/**
 * file://DIR: the embedded default store. Object `a/b/c` is the file DIR/a/b/c (0600, in
 * directories created 0700), so an operator can read the store with ls and cat.
 *
 * Writes are atomic (file-spares.ts): a temporary file in the target directory (a replaced
 * version's inode when there is one), fsync, rename over the target, fsync the directory.
 * Readers never lock: a rename is atomic, so they see the old or the new bytes, never a mix.
 * The etag is the SHA-256 of the content, computed from the bytes read.
 *
 * Conditional writes and deletes hold against other processes on the same directory: every
 * mutation of a key runs under a per-key lock file (file-lock.ts, which explains the protocol).
 * Temporary, spare and lock files start with `.bootseal-` (a reserved key segment); listing
 * skips them. What a killed writer leaves behind (a temporary file, spares, a lock) `sweepStale` removes
 * (file-sweep.ts).
 */
import { createHash } from "node:crypto";
import { readdir, stat, unlink } from "node:fs/promises";
import { basename, dirname, join, resolve, sep } from "node:path";
import type { CallOptions } from "../../src/call-options.ts";
import { BootsealError } from "../../src/errors.ts";
import { syncDirectory } from "../../src/files/atomic-write.ts";
import { closeFd, fstatFd, openFd, readFd } from "../../src/files/fd.ts";
import { errno, fsError } from "./file-errors.ts";
import { KeyLocks } from "./file-lock.ts";
import { SpareInodes } from "./file-spares.ts";
import {
  HOST_TAG,
  pruneEmptyDirs,
  SPARE_PREFIX,
  type SweepOptions,
  type SweepResult,
  sweepStale,
  TEMP_PREFIX,
} from "./file-sweep.ts";
import type { GetOptions, ObjectInfo, ObjectStore, StoredObject, WriteCondition } from "./object-store.ts";
import type { StoreSchemeType } from "./store-scheme.ts";
import type { ObjectLocation } from "./store-url.ts";
import {
  compareKeys,
  etagValue,
  type FileLocation,
  isValidKey,
  RESERVED_SEGMENT_PREFIX,
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

function contentEtag(body: Uint8Array): string {
  return `"${createHash("sha256").update(body).digest("hex")}"`;
}

function lostRace(message: string): BootsealError {
  return new BootsealError("PRECONDITION_FAILED", message);
}

interface ReadResult {
  readonly body: Buffer;
  readonly mtime: Date;
}

function tooLarge(maxBytes: number): BootsealError {
  return new BootsealError("TOO_LARGE", `file store: the object is larger than ${maxBytes} bytes`);
}

/**
 * At most maxBytes of an open file: the stat size plus one byte (to see the end), in reads of
 * at most 1 MiB. A short read is the end: objects are replaced by rename, never appended to,
 * and a regular file reads short only there, so a small object costs one read.
 */
async function readCapped(fd: number, size: number, maxBytes: number): Promise<Buffer> {
  if (size > maxBytes) throw tooLarge(maxBytes);
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    const want = Math.min(1 << 20, maxBytes - total + 1, Math.max(size - total + 1, 4096));
    const chunk = Buffer.allocUnsafe(want);
    const bytesRead = await readFd(fd, chunk, 0, want);
    total += bytesRead;
    if (total > maxBytes) throw tooLarge(maxBytes); // it grew after the stat
    if (bytesRead > 0) chunks.push(chunk.subarray(0, bytesRead));
    if (bytesRead < want) return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total);
  }
}

async function readObject(path: string, maxBytes = Number.POSITIVE_INFINITY): Promise<ReadResult | null> {
  let fd: number | undefined;
  try {
    fd = await openFd(path, "r");
    const st = await fstatFd(fd);
    if (!st.isFile()) return null;
    return { body: await readCapped(fd, st.size, maxBytes), mtime: st.mtime };
  } catch (err) {
    if (err instanceof BootsealError) throw err;
    const code = errno(err);
    if (code === "ENOENT" || code === "ENOTDIR" || code === "EISDIR") return null;
    throw fsError(err, "read an object");
  } finally {
    if (fd !== undefined) await closeFd(fd).catch(() => {});
  }
}

/** Reads for a conditional check: the body's etag is all they need. */
const CHECK_CHUNK = 64 * 1024;

/**
 * The etag of what is stored at `path` now, or null when nothing is: a conditional write's
 * or delete's check, under the key's lock. open, read, close (no fstat): the content is hashed
 * as it is read, through one scratch buffer.
 */
async function currentEtag(path: string): Promise<string | null> {
  let fd: number | undefined;
  try {
    fd = await openFd(path, "r");
    const hash = createHash("sha256");
    const chunk = Buffer.allocUnsafe(CHECK_CHUNK);
    for (;;) {
      const bytesRead = await readFd(fd, chunk, 0, CHECK_CHUNK);
      if (bytesRead > 0) hash.update(chunk.subarray(0, bytesRead));
      if (bytesRead < CHECK_CHUNK) return `"${hash.digest("hex")}"`;
    }
  } catch (err) {
    const code = errno(err);
    if (code === "ENOENT" || code === "ENOTDIR" || code === "EISDIR") return null;
    throw fsError(err, "read an object");
  } finally {
    if (fd !== undefined) await closeFd(fd).catch(() => {});
  }
}

/** True when a file is at `path` (one stat): a delete of nothing takes no lock and makes no directory. */
async function fileExists(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch (err) {
    const code = errno(err);
    if (code === "ENOENT" || code === "ENOTDIR") return false;
    throw fsError(err, "read an object");
  }
}

export class FileStore implements ObjectStore {
  readonly url: string;
  readonly #root: string;
  readonly #locks: KeyLocks;
  readonly #spares: SpareInodes;
  #keepSpares = false;

  constructor(dir: string, options: FileStoreOptions = {}) {
    this.#root = dir;
    this.url = `file://${dir}`;
    this.#spares = new SpareInodes(
      `${TEMP_PREFIX}${HOST_TAG}.${process.pid}.`,
      `${SPARE_PREFIX}${HOST_TAG}.${process.pid}.`,
    );
    this.#locks = new KeyLocks(dir, options.lockTimeoutMs ?? 45_000, options.staleLockMs ?? 30_000);
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
    return this.#locks.run(key, options?.signal, async () => {
      if (!("unconditional" in condition)) {
        const current = await currentEtag(path);
        if ("ifNoneMatch" in condition && current !== null) throw lostRace("object already exists");
        if (
          "ifMatch" in condition &&
          (current === null || etagValue(current) !== etagValue(condition.ifMatch))
        ) {
          throw lostRace("object changed since it was read");
        }
      }
      // A create-only write replaces nothing: no link to try.
      await this.#writeAtomic(path, bytes, this.#keepSpares && !("ifNoneMatch" in condition));
      // The rename just happened: its time is the file's mtime to within a clock tick (as S3's
      // PutObject, the answer carries no stat).
      return { key, etag: contentEtag(bytes), size: bytes.byteLength, lastModified: new Date() };
    });
  }

  async delete(key: string, condition?: { ifMatch: string }, options?: CallOptions): Promise<boolean> {
    options?.signal?.throwIfAborted();
    const path = this.#path(key);
    if (!(await fileExists(path))) return false; // nothing there: no lock, no directories made
    const deleted = await this.#locks.run(key, options?.signal, async () => {
      const current = await currentEtag(path);
      if (current === null) return false;
      if (condition && etagValue(current) !== etagValue(condition.ifMatch)) {
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
    if (deleted) {
      await this.#spares.drop(dirname(path));
      await pruneEmptyDirs(this.#root, dirname(path));
    }
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

  async #writeAtomic(path: string, body: Uint8Array, keepReplaced: boolean): Promise<void> {
    try {
      await this.#spares.write(path, body, keepReplaced);
    } catch (err) {
      throw fsError(err, "write an object"); // the errno to the store's codes (ENOSPC: 503)
    }
  }

  /**
   * From now on a replaced version's inode is kept for the next write into its directory
   * (file-spares.ts). For a long-running process that also sweeps (`bootseal serve`); it
   * calls dropSpares when it closes.
   */
  keepSpares(): void {
    this.#keepSpares = true;
  }

  /** Removes the spares this store keeps (and keeps none from now on). */
  async dropSpares(): Promise<void> {
    this.#keepSpares = false;
    await this.#spares.dropAll();
  }

  /**
   * Removes what crashed writers left in the store: temporary files older than `olderThanMs`
   * (default 15 min) or whose writer (this host, by pid) no longer runs, spares (file-spares.ts)
   * older than `spareOlderThanMs` (default 2 h) or of a writer gone, and locks that are
   * stale by the lock rule (owner gone, or older than `staleLockMs`). A live writer's files are
   * never touched: its temporary file is younger than the bound and its pid runs. Symbolic
   * links are not followed; files vanishing meanwhile are fine.
   */
  sweepStale(options: SweepOptions = {}): Promise<SweepResult> {
    return sweepStale(this.#root, this.#locks, options);
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

/** `file:///DIR/FILE`: the store is the directory, the key the file's name. */
function parseFileObject(path: string, url: string, what: string): ObjectLocation {
  if (!path.startsWith("/")) throw usage(`${what} file:// wants an absolute path`);
  return { storeUrl: `file://${dirname(path)}`, key: basename(path), display: url, path, pathName: "path" };
}

export const fileScheme: StoreSchemeType<"file", FileLocation, "file", FileStoreOptions> = {
  scheme: "file",
  optionsKey: "file",
  example: "file://DIR",
  objectExample: "file:///PATH",
  parse: parseFileUrl,
  parseObject: parseFileObject,
  // Nothing to switch off: the file store makes one attempt per call.
  oneAttempt: (options) => options ?? {},
  open: (location, options) => new FileStore(location.dir, options),
};
