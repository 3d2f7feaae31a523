/**
 * A map bounded by the total size of what it holds (each entry's size from `sizeOf`): the
 * least recently used entries go first, and an entry larger than the whole bound is not kept.
 * The service's record cache, the auth plugin's failure counters (each of size 1) and the
 * controller's kept status answers use it.
 */
export class SizeBoundedLru<K, V> {
  readonly #entries = new Map<K, V>();
  readonly #maxSize: number;
  readonly #sizeOf: (value: V) => number;
  #size = 0;

  constructor(maxSize: number, sizeOf: (value: V) => number) {
    this.#maxSize = maxSize;
    this.#sizeOf = sizeOf;
  }

  /** The value, now the most recently used. */
  get(key: K): V | undefined {
    const value = this.#entries.get(key);
    if (value === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, value);
    return value;
  }

  /** The value, its recency unchanged. */
  peek(key: K): V | undefined {
    return this.#entries.get(key);
  }

  /** Replaces what the key held; the least recently used go until the bound holds. */
  set(key: K, value: V): void {
    this.delete(key);
    const size = this.#sizeOf(value);
    if (size > this.#maxSize) return;
    this.#entries.set(key, value);
    this.#size += size;
    for (const [k, v] of this.#entries) {
      if (this.#size <= this.#maxSize) break;
      this.#entries.delete(k);
      this.#size -= this.#sizeOf(v);
    }
  }

  delete(key: K): void {
    const value = this.#entries.get(key);
    if (value === undefined) return;
    this.#entries.delete(key);
    this.#size -= this.#sizeOf(value);
  }

  /** Entries held and their total size. */
  get size(): { readonly entries: number; readonly total: number } {
    return { entries: this.#entries.size, total: this.#size };
  }
}
