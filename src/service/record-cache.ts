/**
 * The last version of each small record (token and status records) this replica read or
 * wrote, as a first guess for compare-and-swap. It is never an answer by itself: a guess is
 * only ever used where a conditional write on that very version follows, so a stale entry
 * costs one lost race (412) and a re-read, never a stale decision. Bounded by bytes (least
 * recently used go first). A key that lost a race through its entry is not cached again for
 * a while: its machine is being served by several replicas at once (a round-robin load
 * balancer), where guesses would mostly lose and reads first are cheaper.
 *
 * Entries are the records' JSON text, decoded on each use: the bound then counts what is
 * held (a decoded record takes several times its text in heap), and no caller can change a
 * cached value by changing what it was handed.
 */
import { SizeBoundedLru } from "../size-bounded-lru.ts";
import type { Versioned, VersionGuesses } from "./records.ts";

export interface RecordCacheOptions {
  /** Characters of JSON text held at most, about its bytes (default 32 MiB). */
  readonly maxBytes?: number;
  /** How long a key that lost a race is read first instead (default 60 s). */
  readonly contendedMs?: number;
  /** Contended keys remembered at most (default 100,000). */
  readonly maxContended?: number;
  readonly now?: () => number;
}

export class RecordCache implements VersionGuesses {
  readonly #entries: SizeBoundedLru<string, Versioned<string>>;
  /** Contended keys and until when, counted one each: the oldest marked go first. */
  readonly #contended: SizeBoundedLru<string, number>;
  readonly #contendedMs: number;
  readonly #now: () => number;

  constructor(options: RecordCacheOptions = {}) {
    this.#entries = new SizeBoundedLru(options.maxBytes ?? 32 * 1024 * 1024, (record) => record.value.length);
    this.#contended = new SizeBoundedLru(options.maxContended ?? 100_000, () => 1);
    this.#contendedMs = options.contendedMs ?? 60_000;
    this.#now = options.now ?? Date.now;
  }

  /** The JSON text of the version last seen, and its etag. */
  get(key: string): Versioned<string> | undefined {
    return this.#entries.get(key);
  }

  /** Remembers a version read or written, as its JSON text; not for contended keys. */
  set(key: string, record: Versioned<string>): void {
    if (record.etag === "" || this.#isContended(key)) this.#entries.delete(key);
    else this.#entries.set(key, record);
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }

  /** A guess for this key lost a race: forget it, and read first for a while. */
  lostRace(key: string): void {
    this.delete(key);
    this.#contended.set(key, this.#now() + this.#contendedMs);
  }

  #isContended(key: string): boolean {
    // A peek: checking a key does not keep it marked longer than the keys marked after it.
    const until = this.#contended.peek(key);
    if (until === undefined) return false;
    if (until > this.#now()) return true;
    this.#contended.delete(key);
    return false;
  }

  get size(): { readonly entries: number; readonly bytes: number } {
    const { entries, total } = this.#entries.size;
    return { entries, bytes: total };
  }
}
