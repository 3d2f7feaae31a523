/**
 * gs://BUCKET/PREFIX with @google-cloud/storage. The etag this store hands out is the object's
 * generation, quoted (`"1796020896662538"`): GCS preconditions are on generations, so
 * compare-and-swap is `ifGenerationMatch: <etag>` and create-only is `ifGenerationMatch: 0`.
 * GCS answers a lost race with 412.
 *
 * fake-gcs-server 1.55 ignores `ifGenerationMatch` on DELETE (it deletes anyway), so a
 * conditional delete first reads the generation and refuses a mismatch itself, then sends the
 * precondition too: atomic on real GCS, check-then-delete (a small race window) on the fake.
 */
import type { File, Storage, StorageOptions } from "@google-cloud/storage";
import type { CallOptions } from "../../src/call-options.ts";
import { BootsealError } from "../../src/errors.ts";
import { lazyModule } from "../lazy-module.ts";
import type { GetOptions, ObjectInfo, ObjectStore, StoredObject, WriteCondition } from "./object-store.ts";
import { retryingStore } from "./retrying.ts";
import type { StoreSchemeType } from "./store-scheme.ts";
import {
  type BucketLocation,
  checkEndpoint,
  type Env,
  etagValue,
  formatStoreUrl,
  fullKey,
  isValidKey,
  nonEmpty,
  parseBucketObject,
  parseBucketUrl,
  validateListPrefix,
} from "./store-url.ts";

export interface GcsStoreOptions {
  /** e.g. http://127.0.0.1:4443 for fake-gcs-server; default STORAGE_EMULATOR_HOST, then Google. */
  readonly apiEndpoint?: string;
  /** Default GOOGLE_CLOUD_PROJECT / GCLOUD_PROJECT; object operations do not need one. */
  readonly projectId?: string;
  /** objects.list page size (maxResults). */
  readonly pageSize?: number;
  /** Retries of a failed call (default 1), by openStore's retry wrapper: an unreachable endpoint fails in seconds. */
  readonly maxRetries?: number;
  /** Deadline per attempt of a store call (default 30 s). */
  readonly timeoutMs?: number;
}

const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EAI_AGAIN"]);

/** The library loads with the first request, not when the store is opened; every GCS error comes from a client made after that. */
const gcsSdk = lazyModule(() => import("@google-cloud/storage"));
const loadGcsSdk = gcsSdk.load;

function httpCode(err: unknown): number | undefined {
  // Before the library is loaded no request has run, so nothing can be its ApiError.
  const ApiError = gcsSdk.loaded?.ApiError;
  return ApiError !== undefined && err instanceof ApiError && typeof err.code === "number"
    ? err.code
    : undefined;
}

function lostRace(cause?: unknown): BootsealError {
  return new BootsealError("PRECONDITION_FAILED", "object changed or already exists", { cause });
}

export function mapGcsError(err: unknown, bucket: string, action: "read" | "write"): unknown {
  if (err instanceof BootsealError) return err;
  if (err instanceof Error && err.name === "AbortError") return err;
  const code = httpCode(err);
  if (code === 412 || code === 409 || code === 304) return lostRace(err);
  if (code === 401 || code === 403) {
    return new BootsealError("STORE_FORBIDDEN", `GCS refused the credentials (${code})`, { cause: err });
  }
  // Object reads turn a 404 into null before they get here; a 404 left over means the bucket.
  if (code === 404) {
    return new BootsealError("NOT_FOUND", `GCS bucket "${bucket}" does not exist`, { cause: err });
  }
  if (code !== undefined && (code >= 500 || code === 429 || code === 408)) {
    return new BootsealError("STORE_UNAVAILABLE", `GCS is unavailable (${code})`, { cause: err });
  }
  if (code !== undefined)
    return new BootsealError("IO_ERROR", `GCS refused the request (${code})`, { cause: err });
  const errno = typeof err === "object" && err !== null && "code" in err ? String(err.code) : "";
  const name = err instanceof Error ? err.name : "";
  if (NETWORK_CODES.has(errno) || name === "FetchError" || name === "TimeoutError") {
    return new BootsealError("STORE_UNAVAILABLE", `GCS endpoint unreachable (${errno || name})`, {
      cause: err,
    });
  }
  return new BootsealError("IO_ERROR", `GCS ${action} failed`, { cause: err });
}

/**
 * The library takes no AbortSignal, and its own `timeout` did not fire against a server that
 * accepts and never answers (storage 8.4.0): every call gets a deadline here instead. On abort
 * or deadline the caller is released at once; the request itself runs out in the background.
 */
async function guarded<T>(
  signal: AbortSignal | undefined,
  timeoutMs: number,
  run: () => Promise<T>,
): Promise<T> {
  signal?.throwIfAborted();
  let onAbort: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const stop = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new BootsealError("STORE_UNAVAILABLE", `GCS did not answer within ${timeoutMs} ms`));
    }, timeoutMs);
    if (signal) {
      onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
    }
  });
  try {
    return await Promise.race([run(), stop]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
  }
}

/** The generation an etag names, or null when it cannot be one of ours (so it matches nothing). */
function generationOf(etag: string): string | null {
  const value = etagValue(etag);
  return /^[1-9][0-9]{0,19}$/.test(value) ? value : null;
}

function etagOf(generation: unknown): string {
  return `"${String(generation)}"`;
}

interface GcsMetadata {
  generation?: string | number;
  size?: string | number;
  updated?: string;
}

function infoOf(key: string, md: GcsMetadata): ObjectInfo {
  return {
    key,
    etag: etagOf(md.generation),
    size: Number(md.size ?? 0),
    lastModified: md.updated ? new Date(md.updated) : new Date(0),
  };
}

export class GcsStore implements ObjectStore {
  readonly url: string;
  readonly #options: StorageOptions;
  /** Made with the first request (the library loads then), one per store. */
  #storage: Promise<Storage> | undefined;
  readonly #bucketName: string;
  readonly #prefix: string;
  readonly #pageSize: number;
  readonly #timeoutMs: number;

  constructor(bucket: string, prefix: string, options: GcsStoreOptions = {}) {
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#bucketName = bucket;
    this.#prefix = prefix;
    this.url = formatStoreUrl({ scheme: "gs", bucket, prefix });
    this.#pageSize = Math.max(1, Math.min(1000, options.pageSize ?? 1000));
    this.#options = {
      ...(options.apiEndpoint ? { apiEndpoint: options.apiEndpoint } : {}),
      ...(options.projectId ? { projectId: options.projectId } : {}),
      timeout: this.#timeoutMs,
      // The library's retry loop is off (its defaults retry for up to 10 minutes): openStore
      // wraps the store in src/retry.ts (retrying.ts), the only retry layer.
      retryOptions: { autoRetry: false, maxRetries: 0 },
    };
  }

  #client(): Promise<Storage> {
    this.#storage ??= loadGcsSdk().then(
      (sdk) => {
        const storage = new sdk.Storage(this.#options);
        // With STORAGE_EMULATOR_HOST in process.env the library (8.4.0) takes that value
        // verbatim as its JSON API base, without /storage/v1, whatever apiEndpoint says: every
        // call then answers 404. The endpoint is already settled (gcsSettings), so the base follows it.
        storage.apiEndpoint = storage.apiEndpoint.replace(/\/storage\/v1$/, "");
        storage.baseUrl = `${storage.apiEndpoint}/storage/v1`;
        return storage;
      },
      (err: unknown) => {
        this.#storage = undefined;
        throw err;
      },
    );
    return this.#storage;
  }

  async #file(key: string, generation?: string): Promise<File> {
    const name = fullKey(this.#prefix, key);
    const bucket = (await this.#client()).bucket(this.#bucketName);
    return generation ? bucket.file(name, { generation }) : bucket.file(name);
  }

  async #metadata(key: string, signal?: AbortSignal): Promise<GcsMetadata | null> {
    try {
      const file = await this.#file(key);
      const [md] = await guarded(signal, this.#timeoutMs, () => file.getMetadata());
      return md as GcsMetadata;
    } catch (err) {
      if (httpCode(err) === 404) return null; // fake-gcs-server says 404 for a missing bucket too
      throw mapGcsError(err, this.#bucketName, "read");
    }
  }

  async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    // Read the generation, then download exactly that generation, so the etag belongs to the
    // bytes returned. A 404 on the download means a writer replaced it in between: read again.
    for (let attempt = 0; attempt < 5; attempt++) {
      const md = await this.#metadata(key, options?.signal);
      if (!md) return null;
      // The download is pinned to this generation, so its size is the size read.
      const maxBytes = options?.maxBytes;
      if (maxBytes !== undefined && Number(md.size ?? 0) > maxBytes) {
        throw new BootsealError("TOO_LARGE", `gs: the object is larger than ${maxBytes} bytes`);
      }
      try {
        const file = await this.#file(key, String(md.generation));
        const [buf] = await guarded(options?.signal, this.#timeoutMs, () => file.download());
        const body = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
        return { ...infoOf(key, md), size: body.byteLength, body };
      } catch (err) {
        if (httpCode(err) !== 404) throw mapGcsError(err, this.#bucketName, "read");
      }
    }
    throw new BootsealError("STORE_UNAVAILABLE", "GCS object kept changing while it was read");
  }

  async head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    const md = await this.#metadata(key, options?.signal);
    return md ? infoOf(key, md) : null;
  }

  async put(
    key: string,
    body: Uint8Array,
    condition: WriteCondition,
    options?: CallOptions & { contentType?: string },
  ): Promise<ObjectInfo> {
    let ifGenerationMatch: string | number | undefined;
    if ("ifNoneMatch" in condition) ifGenerationMatch = 0;
    if ("ifMatch" in condition) {
      const generation = generationOf(condition.ifMatch);
      if (generation === null) throw lostRace();
      ifGenerationMatch = generation;
    }
    let file: File;
    try {
      file = await this.#file(key);
      await guarded(options?.signal, this.#timeoutMs, () =>
        file.save(Buffer.from(body.buffer, body.byteOffset, body.byteLength), {
          resumable: false,
          ...(options?.contentType ? { contentType: options.contentType } : {}),
          ...(ifGenerationMatch === undefined ? {} : { preconditionOpts: { ifGenerationMatch } }),
        }),
      );
    } catch (err) {
      throw mapGcsError(err, this.#bucketName, "write");
    }
    // save() leaves the upload's answer in file.metadata: the new generation, no second call.
    return { ...infoOf(key, file.metadata as GcsMetadata), size: body.byteLength };
  }

  async delete(key: string, condition?: { ifMatch: string }, options?: CallOptions): Promise<boolean> {
    let generation: string | undefined;
    if (condition) {
      const md = await this.#metadata(key, options?.signal);
      if (!md) return false;
      const wanted = generationOf(condition.ifMatch);
      if (wanted === null || wanted !== String(md.generation)) throw lostRace();
      generation = wanted;
    }
    try {
      const file = await this.#file(key);
      await guarded(options?.signal, this.#timeoutMs, () =>
        file.delete(generation ? { ifGenerationMatch: generation } : {}),
      );
      return true;
    } catch (err) {
      if (httpCode(err) === 404) return false;
      throw mapGcsError(err, this.#bucketName, "write");
    }
  }

  async *list(prefix: string, options?: CallOptions): AsyncIterable<ObjectInfo> {
    validateListPrefix(prefix);
    let bucket: ReturnType<Storage["bucket"]>;
    try {
      bucket = (await this.#client()).bucket(this.#bucketName);
    } catch (err) {
      throw mapGcsError(err, this.#bucketName, "read");
    }
    let pageToken: string | undefined;
    do {
      let files: File[];
      let next: { pageToken?: string } | null | undefined;
      try {
        [files, next] = await guarded(options?.signal, this.#timeoutMs, () =>
          bucket.getFiles({
            prefix: this.#prefix + prefix,
            autoPaginate: false,
            maxResults: this.#pageSize,
            ...(pageToken ? { pageToken } : {}),
          }),
        );
      } catch (err) {
        throw mapGcsError(err, this.#bucketName, "read");
      }
      for (const file of files) {
        const key = file.name.slice(this.#prefix.length);
        if (!isValidKey(key)) continue; // "dir/" placeholders and names other tools made
        yield infoOf(key, file.metadata as GcsMetadata);
      }
      pageToken = next?.pageToken;
    } while (pageToken);
  }
}

// GCS bucket names: S3's rules plus '_', and up to 222 characters when the name has dots.
const GS_BUCKET = /^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$/;

/** GCS settings: explicit options, then STORAGE_EMULATOR_HOST and GOOGLE_CLOUD_PROJECT. */
export function gcsSettings(options: GcsStoreOptions, env: Env): GcsStoreOptions {
  const emulator = nonEmpty(env.STORAGE_EMULATOR_HOST);
  // The Google library accepts STORAGE_EMULATOR_HOST without a scheme (host:port).
  const fromEnv = emulator && !/^https?:\/\//.test(emulator) ? `http://${emulator}` : emulator;
  const apiEndpoint =
    checkEndpoint(nonEmpty(options.apiEndpoint), "the GCS endpoint") ??
    checkEndpoint(fromEnv, "STORAGE_EMULATOR_HOST");
  const projectId =
    nonEmpty(options.projectId) ?? nonEmpty(env.GOOGLE_CLOUD_PROJECT) ?? nonEmpty(env.GCLOUD_PROJECT);
  return { ...options, ...(apiEndpoint ? { apiEndpoint } : {}), ...(projectId ? { projectId } : {}) };
}

const parseGsUrl = (rest: string): BucketLocation<"gs"> =>
  parseBucketUrl("gs", rest, {
    bucket: GS_BUCKET,
    endpointHint: "STORAGE_EMULATOR_HOST or the store options",
    example: "gs://BUCKET/PREFIX",
  });

export const gcsScheme: StoreSchemeType<"gs", BucketLocation<"gs">, "gcs", GcsStoreOptions> = {
  scheme: "gs",
  optionsKey: "gcs",
  example: "gs://BUCKET/PREFIX",
  objectExample: "gs://BUCKET/KEY",
  parse: parseGsUrl,
  parseObject: (rest, _url, what) => parseBucketObject(rest, what, parseGsUrl),
  oneAttempt: (options) => ({ ...options, maxRetries: 0 }),
  // The library's own retries are off: src/retry.ts (through retryingStore) is the only loop.
  open: (location, options, env) =>
    retryingStore(new GcsStore(location.bucket, location.prefix, gcsSettings(options ?? {}, env)), {
      attempts: (options?.maxRetries ?? 1) + 1,
    }),
};
