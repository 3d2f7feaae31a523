/**
 * The compare-and-swap engine under machine-store.ts: reads and conditional writes of one
 * store's small JSON records (token and status records), and read-modify-write retried on a
 * lost race, so any number of replicas can update the same record without losing an update.
 */
import type { ObjectStore, WriteCondition } from "../../providers/stores/object-store.ts";
import type { CallOptions } from "../call-options.ts";
import { hasCode } from "../errors.ts";
import { withRetry } from "../retry.ts";

/** Read-modify-write attempts at most, each after a lost race. */
const CAS_ATTEMPTS = 20;

/** An object as read, with the version a conditional write of it names. */
export interface Versioned<T> {
  readonly value: T;
  readonly etag: string;
}

/**
 * What a read-modify-write starts from: undefined reads the store first; null assumes the
 * object is absent (its first write is create-only); a version already read is used as is.
 * A wrong guess costs one lost race, never a lost update.
 */
export type Seen<T> = Versioned<T> | null | undefined;

/**
 * This replica's last seen version of each record, as JSON text (record-cache.ts implements
 * it): first guesses only, each confirmed by a conditional write before anything depends on it.
 */
export interface VersionGuesses {
  get(key: string): Versioned<string> | undefined;
  set(key: string, record: Versioned<string>): void;
  delete(key: string): void;
  /** A guess for this key lost a race. */
  lostRace(key: string): void;
}

/** Another writer changed the object since it was read (a conditional write or delete refused). */
export function isLostRace(err: unknown): boolean {
  return hasCode(err, "PRECONDITION_FAILED");
}

const encodeJson = (value: unknown): string => `${JSON.stringify(value)}\n`;

/** A stored body as text, without copying it. */
const utf8 = (body: Uint8Array): string =>
  Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8");

/**
 * Reads and compare-and-swap writes of one store's JSON records, with this replica's last
 * seen version of each kept up to date as a first guess.
 */
export class Records {
  readonly #store: ObjectStore;
  readonly #guesses: VersionGuesses | undefined;

  constructor(store: ObjectStore, guesses: VersionGuesses | undefined) {
    this.#store = store;
    this.#guesses = guesses;
  }

  /** This replica's last seen version: a guess, to be confirmed by a conditional write. */
  cached<T>(key: string, decode: (text: string) => T): Versioned<T> | undefined {
    const entry = this.#guesses?.get(key);
    return entry && { value: decode(entry.value), etag: entry.etag };
  }

  forget(key: string): void {
    this.#guesses?.delete(key);
  }

  async read<T>(
    key: string,
    decode: (text: string) => T,
    options: CallOptions,
  ): Promise<Versioned<T> | null> {
    const obj = await this.#store.get(key, options);
    if (!obj) {
      this.forget(key);
      return null;
    }
    const text = utf8(obj.body);
    const value = decode(text);
    this.#guesses?.set(key, { value: text, etag: obj.etag });
    return { value, etag: obj.etag };
  }

  /** A read that leaves the guesses alone (a one-off look, not a record this replica works on). */
  async readUncached<T>(key: string, decode: (text: string) => T, options: CallOptions): Promise<T | null> {
    const obj = await this.#store.get(key, options);
    return obj ? decode(utf8(obj.body)) : null;
  }

  /** Writes a record under `condition` and remembers the version written. */
  async write<T>(key: string, value: T, condition: WriteCondition, options: CallOptions): Promise<void> {
    const text = encodeJson(value);
    const info = await this.#store.put(key, Buffer.from(text), condition, {
      ...options,
      contentType: "application/json",
    });
    this.#guesses?.set(key, { value: text, etag: info.etag });
  }

  /**
   * Read-modify-write with a conditional put, retried when another writer got there first.
   * `mutate` returns the new value, or undefined to leave the record as is. It starts from
   * `seen` (or this replica's cached version) when there is one: only a successful
   * conditional write confirms such a guess, so when `mutate` refuses it (throws) or keeps it
   * (undefined), the record is read again and `mutate` decides on what the store holds.
   */
  async update<T>(
    key: string,
    decode: (text: string) => T,
    mutate: (current: T | null) => T | undefined,
    options: CallOptions,
    seen?: Seen<T>,
  ): Promise<T | undefined> {
    let guess: Seen<T> = seen !== undefined ? seen : this.cached(key, decode);
    const { value } = await withRetry(
      async () => {
        let guessed = guess !== undefined;
        let current = guessed ? (guess as Versioned<T> | null) : await this.read(key, decode, options);
        guess = undefined; // a lost race reads the store
        for (;;) {
          let next: T | undefined;
          try {
            next = mutate(current ? current.value : null);
          } catch (err) {
            if (!guessed) throw err;
            next = undefined;
          }
          if (next === undefined && guessed) {
            current = await this.read(key, decode, options);
            guessed = false;
            continue;
          }
          if (next === undefined) return undefined;
          try {
            await this.write(key, next, current ? { ifMatch: current.etag } : { ifNoneMatch: "*" }, options);
          } catch (err) {
            if (isLostRace(err) && guessed) this.#guesses?.lostRace(key);
            else this.forget(key);
            throw err;
          }
          return next;
        }
      },
      {
        what: `update ${key}`,
        maxAttempts: CAS_ATTEMPTS,
        // Only a lost race is worth another read-modify-write; the store retries its own failures.
        classify: (err) => ({ retry: isLostRace(err) }),
        // Jittered backoff: racing replicas spread out instead of colliding again.
        backoff: { baseMs: 5, capMs: 200 },
        rethrowLast: true,
        signal: options.signal,
      },
    );
    return value;
  }
}
