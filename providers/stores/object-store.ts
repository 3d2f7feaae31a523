/**
 * The ObjectStore seam: file://, s3://, gs:// all implement it. Absence is a value (null);
 * failures are BootsealErrors with the codes NOT_FOUND, PRECONDITION_FAILED (whatever the
 * peer answered on a lost race: 412, 409 or 304), STORE_FORBIDDEN and STORE_UNAVAILABLE
 * (retryable). Each backend maps its own quirks inside its own file.
 */
import type { CallOptions } from "../../src/call-options.ts";

export interface ObjectInfo {
  readonly key: string;
  /** Opaque; compare for equality only. */
  readonly etag: string;
  readonly size: number;
  readonly lastModified: Date;
}

export interface StoredObject extends ObjectInfo {
  readonly body: Uint8Array;
}

/** Required on every write: an unconditional write has to say so. */
export type WriteCondition =
  | { readonly ifMatch: string } // replace exactly this version
  | { readonly ifNoneMatch: "*" } // create only
  | { readonly unconditional: true };

/** `maxBytes`: an object larger than this fails with TOO_LARGE, without being read whole. */
export type GetOptions = CallOptions & { readonly maxBytes?: number };

export interface ObjectStore {
  /** s3://bucket/prefix etc., never with credentials. */
  readonly url: string;
  get(key: string, options?: GetOptions): Promise<StoredObject | null>;
  head(key: string, options?: CallOptions): Promise<ObjectInfo | null>;
  put(
    key: string,
    body: Uint8Array,
    condition: WriteCondition,
    options?: CallOptions & { contentType?: string },
  ): Promise<ObjectInfo>;
  /** Resolves false when there was nothing to delete (idempotent). */
  delete(key: string, condition?: { ifMatch: string }, options?: CallOptions): Promise<boolean>;
  /** Every object under prefix; paging hidden. */
  list(prefix: string, options?: CallOptions): AsyncIterable<ObjectInfo>;
}
