/**
 * An in-memory ObjectStore for unit tests of other modules. Same semantics as the real stores
 * (it passes the same contract suite): validated keys, content-hash etags, create-only and
 * compare-and-swap writes, idempotent delete, listing in UTF-8 byte order. Bodies are copied on
 * the way in and out, so a caller mutating its buffer cannot change a stored object.
 */
import { createHash } from "node:crypto";
import type { CallOptions } from "../../src/call-options.ts";
import { BootsealError } from "../../src/errors.ts";
import type { ObjectInfo, ObjectStore, StoredObject, WriteCondition } from "./object-store.ts";
import { compareKeys, etagValue, validateKey, validateListPrefix } from "./store-url.ts";

interface Entry {
  readonly body: Uint8Array;
  readonly etag: string;
  readonly lastModified: Date;
}

function lostRace(message: string): BootsealError {
  return new BootsealError("PRECONDITION_FAILED", message);
}

export class MemoryStore implements ObjectStore {
  readonly url: string;
  readonly #objects = new Map<string, Entry>();

  constructor(name = "test") {
    this.url = `memory://${name}`;
  }

  async get(key: string, options?: CallOptions): Promise<StoredObject | null> {
    options?.signal?.throwIfAborted();
    const entry = this.#objects.get(validateKey(key));
    if (!entry) return null;
    return { ...info(key, entry), body: entry.body.slice() };
  }

  async head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    options?.signal?.throwIfAborted();
    const entry = this.#objects.get(validateKey(key));
    return entry ? info(key, entry) : null;
  }

  async put(
    key: string,
    body: Uint8Array,
    condition: WriteCondition,
    options?: CallOptions & { contentType?: string },
  ): Promise<ObjectInfo> {
    options?.signal?.throwIfAborted();
    validateKey(key);
    // Check and write happen in one synchronous step, so concurrent callers in this process
    // see exactly one winner, as they would on a real store.
    const current = this.#objects.get(key);
    if ("ifNoneMatch" in condition && current) throw lostRace("object already exists");
    if ("ifMatch" in condition && (!current || etagValue(current.etag) !== etagValue(condition.ifMatch))) {
      throw lostRace("object changed since it was read");
    }
    const copy = Uint8Array.from(body);
    const entry: Entry = {
      body: copy,
      etag: `"${createHash("sha256").update(copy).digest("hex")}"`,
      lastModified: new Date(),
    };
    this.#objects.set(key, entry);
    return info(key, entry);
  }

  async delete(key: string, condition?: { ifMatch: string }, options?: CallOptions): Promise<boolean> {
    options?.signal?.throwIfAborted();
    const current = this.#objects.get(validateKey(key));
    if (!current) return false;
    if (condition && etagValue(current.etag) !== etagValue(condition.ifMatch)) {
      throw lostRace("object changed since it was read");
    }
    this.#objects.delete(key);
    return true;
  }

  async *list(prefix: string, options?: CallOptions): AsyncIterable<ObjectInfo> {
    validateListPrefix(prefix);
    const keys = [...this.#objects.keys()].filter((k) => k.startsWith(prefix)).sort(compareKeys);
    for (const key of keys) {
      options?.signal?.throwIfAborted();
      const entry = this.#objects.get(key);
      if (entry) yield info(key, entry); // deleted while the caller was iterating: skip
    }
  }
}

function info(key: string, entry: Entry): ObjectInfo {
  return { key, etag: entry.etag, size: entry.body.byteLength, lastModified: entry.lastModified };
}

export function createMemoryStore(name?: string): ObjectStore {
  return new MemoryStore(name);
}
