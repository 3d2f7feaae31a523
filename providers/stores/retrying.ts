/**
 * An ObjectStore whose calls go through the one retry loop (src/retry.ts): STORE_UNAVAILABLE
 * and RATE_LIMITED failures (5xx, throttling, a connection refused or timed out) get a few
 * quick attempts with full-jitter backoff; anything else (a lost race, a refusal, a missing
 * bucket) is final at once. The S3 and GCS libraries' own retries are off, so this is the
 * only layer; a caller with a loop of its own (the fetcher) opens its store with one attempt.
 */

import type { CallOptions } from "../../src/call-options.ts";
import { withRetry } from "../../src/retry.ts";
import type { ObjectInfo, ObjectStore, StoredObject, WriteCondition } from "./object-store.ts";

export interface StoreRetry {
  /** Total attempts, the first included; 1 = no retry. */
  readonly attempts: number;
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
}

export function retryingStore(store: ObjectStore, retry: StoreRetry): ObjectStore {
  if (retry.attempts <= 1) return store;
  const run = async <T>(what: string, options: CallOptions | undefined, fn: () => Promise<T>): Promise<T> => {
    const { value } = await withRetry(fn, {
      what: `${what} ${store.url}`,
      maxAttempts: retry.attempts,
      backoff: { baseMs: retry.baseDelayMs ?? 100, capMs: retry.maxDelayMs ?? 1000 },
      // The store's messages name the failure; the callers match on them, not on a wrapper's.
      rethrowLast: true,
      signal: options?.signal,
    });
    return value;
  };
  return {
    url: store.url,
    get: (key: string, options?: CallOptions): Promise<StoredObject | null> =>
      run("get", options, () => store.get(key, options)),
    head: (key: string, options?: CallOptions): Promise<ObjectInfo | null> =>
      run("head", options, () => store.head(key, options)),
    put: (
      key: string,
      body: Uint8Array,
      condition: WriteCondition,
      options?: CallOptions & { contentType?: string },
    ): Promise<ObjectInfo> => run("put", options, () => store.put(key, body, condition, options)),
    delete: (key: string, condition?: { ifMatch: string }, options?: CallOptions): Promise<boolean> =>
      run("delete", options, () => store.delete(key, condition, options)),
    /** Retried until the first page answers; a failure later in the listing is the caller's. */
    async *list(prefix: string, options?: CallOptions): AsyncIterable<ObjectInfo> {
      const { iterator, first } = await run("list", options, async () => {
        const it = store.list(prefix, options)[Symbol.asyncIterator]();
        return { iterator: it, first: await it.next() };
      });
      for (let next = first; !next.done; next = await iterator.next()) yield next.value;
    },
  };
}
