/**
 * s3://BUCKET/PREFIX on AWS S3 and S3-compatible servers (MinIO, SeaweedFS, moto). The calls
 * on one object go through s3-object-calls.ts (the SDK's endpoint rules, credentials, signer
 * and HTTP handler, without `S3Client.send`'s per-call cost); listing through
 * @aws-sdk/client-s3. Create-only is `If-None-Match: *` and compare-and-swap is `If-Match` on
 * PutObject; every way a server says "you lost" (412 PreconditionFailed, 409
 * ConditionalRequestConflict, 304, and moto's 404 NoSuchKey for If-Match on a missing key)
 * becomes PRECONDITION_FAILED.
 *
 * Delete: S3 answers 204 whether or not the key existed, so a HEAD first tells `delete` what to
 * return. A conditional delete sends If-Match, which AWS (since 2025-09), SeaweedFS 4.48 and
 * moto 5.2.5 honour, so on them the delete itself is atomic; whether this server does is
 * probed once per store (`#conditionalDeletes`: a probe object under the reserved `.bootseal-`
 * prefix, deleted with a wrong If-Match, must survive). Where it is honoured the delete is one
 * call (204: it was there and matched); elsewhere a HEAD first checks the etag. A 412 then
 * needs a second HEAD, to tell "gone" (false; SeaweedFS answers If-Match on a missing key
 * with 412) from "changed" (PRECONDITION_FAILED). Where a DeleteObjects key's ETag is honoured
 * too (the same probe), conditional deletes that arrive together go as one DeleteObjects
 * (s3-delete-batch.ts).
 */

import { randomUUID } from "node:crypto";
import type { S3Client, S3ClientConfig, S3ServiceException } from "@aws-sdk/client-s3";
import type { CallOptions } from "../../src/call-options.ts";
import { BootsealError } from "../../src/errors.ts";
import { lazyModule } from "../lazy-module.ts";
import type { GetOptions, ObjectInfo, ObjectStore, StoredObject, WriteCondition } from "./object-store.ts";
import { retryingStore } from "./retrying.ts";
import {
  type ConditionalDelete,
  DeleteBatcher,
  deleteObjectsErrors,
  deleteObjectsRequest,
} from "./s3-delete-batch.ts";
import {
  type ObjectCallOptions,
  type ObjectMethod,
  S3ObjectCalls,
  S3ResponseError,
} from "./s3-object-calls.ts";
import type { StoreSchemeType } from "./store-scheme.ts";
import {
  type BucketLocation,
  checkEndpoint,
  type Env,
  formatStoreUrl,
  fullKey,
  isValidKey,
  nonEmpty,
  parseBool,
  parseBucketObject,
  parseBucketUrl,
  RESERVED_SEGMENT_PREFIX,
  validateListPrefix,
} from "./store-url.ts";

export interface S3Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

export interface S3StoreOptions {
  /** e.g. http://127.0.0.1:9000; default AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL, then AWS. */
  readonly endpoint?: string;
  /** Default AWS_REGION, AWS_DEFAULT_REGION, then us-east-1. */
  readonly region?: string;
  /** Default BOOTSEAL_S3_FORCE_PATH_STYLE, else true when an endpoint is set (MinIO & co.). */
  readonly forcePathStyle?: boolean;
  /** Default: the SDK's credential chain (AWS_ACCESS_KEY_ID, profiles, IMDS, ...). */
  readonly credentials?: S3Credentials;
  /** ListObjectsV2 page size (MaxKeys, at most 1000). */
  readonly pageSize?: number;
  /** Attempts per call, first one included (default 3); made by openStore's retry wrapper (retrying.ts). */
  readonly maxAttempts?: number;
  /** TCP connect timeout (default 3 s): an unreachable endpoint fails in seconds, not minutes. */
  readonly connectionTimeoutMs?: number;
  /** Socket idle timeout per request (default 30 s). */
  readonly requestTimeoutMs?: number;
  /** Keep-alive sockets to the endpoint at most (default 256; the SDK's own default is 50). */
  readonly maxSockets?: number;
}

const LOST_RACE_NAMES = new Set(["PreconditionFailed", "ConditionalRequestConflict", "NotModified"]);
const FORBIDDEN_NAMES = new Set([
  "AccessDenied",
  "InvalidAccessKeyId",
  "SignatureDoesNotMatch",
  "ExpiredToken",
  "InvalidToken",
  "TokenRefreshRequired",
  "AllAccessDisabled",
  "CredentialsProviderError",
]);
const UNAVAILABLE_NAMES = new Set([
  "TimeoutError",
  "RequestTimeout",
  "RequestTimeoutException",
  "SlowDown",
  "ServiceUnavailable",
  "InternalError",
  "ThrottlingException",
]);
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ECONNABORTED",
]);

/** The SDK loads with the first request, not when the store is opened; every S3 error comes from a client made after that. */
type S3Sdk = typeof import("@aws-sdk/client-s3");
const s3Sdk = lazyModule<S3Sdk>(() => import("@aws-sdk/client-s3"));
const loadS3Sdk = s3Sdk.load;

/** S3's answer behind a failed call, from the object calls or from the SDK (listing). */
function answerOf(err: unknown): { readonly status: number | undefined; readonly name: string } | undefined {
  if (err instanceof S3ResponseError) return { status: err.status, name: err.name };
  if (isSdkError(err)) return { status: err.$metadata.httpStatusCode, name: err.name };
  return undefined;
}

/**
 * `err instanceof S3ServiceException`. Before the SDK is loaded no request has run, so the
 * error cannot come from S3; the SDK's own duck-typed test (ServiceException.isInstance) decides.
 */
function isSdkError(err: unknown): err is S3ServiceException {
  const loadedS3Sdk = s3Sdk.loaded;
  if (loadedS3Sdk !== undefined) return err instanceof loadedS3Sdk.S3ServiceException;
  const e = err as { $fault?: unknown; $metadata?: unknown } | null;
  return (
    err instanceof Error &&
    typeof e?.$metadata === "object" &&
    e.$metadata !== null &&
    (e.$fault === "client" || e.$fault === "server")
  );
}

function isLostRace(err: unknown): boolean {
  const a = answerOf(err);
  return (
    a !== undefined &&
    (LOST_RACE_NAMES.has(a.name) || a.status === 412 || a.status === 409 || a.status === 304)
  );
}

function isMissingKey(err: unknown): boolean {
  const a = answerOf(err);
  return a !== undefined && a.name !== "NoSuchBucket" && (a.name === "NoSuchKey" || a.status === 404);
}

function isAbort(err: unknown): boolean {
  return err instanceof Error && err.name === "AbortError";
}

/** Maps any SDK failure to a BootsealError; never echoes credentials or endpoint details. */
export function mapS3Error(err: unknown, bucket: string): unknown {
  if (err instanceof BootsealError || isAbort(err)) return err;
  const name = err instanceof Error ? err.name : "";
  const code = typeof err === "object" && err !== null && "code" in err ? String(err.code) : "";
  const answer = answerOf(err);
  if (answer !== undefined) {
    const s = answer.status ?? 0;
    if (isLostRace(err))
      return new BootsealError("PRECONDITION_FAILED", "object changed or already exists", { cause: err });
    if (name === "NoSuchBucket") {
      return new BootsealError("NOT_FOUND", `S3 bucket "${bucket}" does not exist`, { cause: err });
    }
    if (s === 401 || s === 403 || FORBIDDEN_NAMES.has(name)) {
      return new BootsealError("STORE_FORBIDDEN", `S3 refused the credentials (${name || s})`, {
        cause: err,
      });
    }
    if (s >= 500 || s === 429 || UNAVAILABLE_NAMES.has(name)) {
      return new BootsealError("STORE_UNAVAILABLE", `S3 is unavailable (${name || s})`, { cause: err });
    }
    return new BootsealError("IO_ERROR", `S3 refused the request (${name || s})`, { cause: err });
  }
  if (FORBIDDEN_NAMES.has(name)) {
    return new BootsealError("STORE_FORBIDDEN", "no usable S3 credentials", { cause: err });
  }
  const nested =
    err instanceof AggregateError ? err.errors.map((e) => (e as { code?: string }).code ?? "") : [];
  if (UNAVAILABLE_NAMES.has(name) || NETWORK_CODES.has(code) || nested.some((c) => NETWORK_CODES.has(c))) {
    return new BootsealError("STORE_UNAVAILABLE", `S3 endpoint unreachable (${code || name})`, {
      cause: err,
    });
  }
  return new BootsealError("IO_ERROR", "S3 request failed", { cause: err });
}

export class S3Store implements ObjectStore {
  readonly url: string;
  readonly #config: S3ClientConfig;
  /** Made with the first request (the SDK loads then), one per store. */
  #client: Promise<{ sdk: S3Sdk; client: S3Client; calls: S3ObjectCalls }> | undefined;
  #made: S3Client | undefined;
  #destroyed = false;
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #pageSize: number;
  /** Whether deletes honour their conditions here: probed with the first conditional delete. */
  #deleteProbe: Promise<{ readonly one: boolean; readonly batch: boolean }> | undefined;
  /** Conditional deletes grouped (s3-delete-batch.ts), once the probe found the server honours them. */
  #batcher: DeleteBatcher | undefined;

  constructor(bucket: string, prefix: string, options: S3StoreOptions & { region: string }) {
    this.#bucket = bucket;
    this.#prefix = prefix;
    this.url = formatStoreUrl({ scheme: "s3", bucket, prefix });
    this.#pageSize = Math.max(1, Math.min(1000, options.pageSize ?? 1000));
    this.#config = {
      region: options.region,
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      forcePathStyle: options.forcePathStyle ?? Boolean(options.endpoint),
      ...(options.credentials ? { credentials: options.credentials } : {}),
      // The SDK's retry loop is off: openStore wraps the store in src/retry.ts (retrying.ts).
      maxAttempts: 1,
      // CRC32 of every body only where the API requires one (as before SDK 3.729): the objects
      // carry their own integrity (a SOPS MAC, JSON records checked on read), TLS carries the
      // rest, and the checksums were a fifth of the client's CPU per call in a boot storm.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
      requestHandler: {
        connectionTimeout: options.connectionTimeoutMs ?? 3000,
        requestTimeout: options.requestTimeoutMs ?? 30_000,
        // Without this the SDK only logs a warning when requestTimeout passes and keeps waiting
        // on a server that accepted the connection but never answers.
        throwOnRequestTimeout: true,
        // A boot storm has hundreds of requests in flight, each a few store calls in a row:
        // with the SDK's 50 sockets they queue for a socket instead of the store.
        httpAgent: { keepAlive: true, maxSockets: options.maxSockets ?? 256 },
        httpsAgent: { keepAlive: true, maxSockets: options.maxSockets ?? 256 },
      },
    };
  }

  /** Releases the client's sockets (tests; a service keeps its store for its lifetime). */
  destroy(): void {
    this.#destroyed = true;
    this.#made?.destroy();
  }

  #sdk(): Promise<{ sdk: S3Sdk; client: S3Client; calls: S3ObjectCalls }> {
    this.#client ??= loadS3Sdk().then(
      (sdk) => {
        const client = new sdk.S3Client(this.#config);
        this.#made = client;
        if (this.#destroyed) client.destroy();
        return { sdk, client, calls: new S3ObjectCalls(client, this.#bucket) };
      },
      (err: unknown) => {
        this.#client = undefined;
        throw err;
      },
    );
    return this.#client;
  }

  async #send<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      throw mapS3Error(err, this.#bucket);
    }
  }

  /** One call on the object at `Key` (the full key, prefix included). */
  async #call(method: ObjectMethod, Key: string, options?: ObjectCallOptions) {
    const { calls } = await this.#sdk();
    return calls.send(method, Key, options);
  }

  async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    const Key = fullKey(this.#prefix, key);
    try {
      const r = await this.#call("GET", Key, { signal: options?.signal, maxBytes: options?.maxBytes });
      return {
        key,
        etag: r.headers.etag ?? "",
        size: r.body.byteLength,
        lastModified: lastModified(r.headers),
        body: r.body,
      };
    } catch (err) {
      if (isMissingKey(err)) return null;
      throw mapS3Error(err, this.#bucket);
    }
  }

  async head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    const Key = fullKey(this.#prefix, key);
    try {
      const r = await this.#call("HEAD", Key, { signal: options?.signal });
      return {
        key,
        etag: r.headers.etag ?? "",
        size: Number(r.headers["content-length"] ?? 0),
        lastModified: lastModified(r.headers),
      };
    } catch (err) {
      // A HEAD response has no body, so a missing bucket is a bare 404 too: it reads as absent.
      if (isMissingKey(err)) return null;
      throw mapS3Error(err, this.#bucket);
    }
  }

  async put(
    key: string,
    body: Uint8Array,
    condition: WriteCondition,
    options?: CallOptions & { contentType?: string },
  ): Promise<ObjectInfo> {
    const Key = fullKey(this.#prefix, key);
    const headers: Record<string, string> = {
      ...("ifNoneMatch" in condition ? { "if-none-match": "*" } : {}),
      ...("ifMatch" in condition ? { "if-match": quoted(condition.ifMatch) } : {}),
      ...(options?.contentType ? { "content-type": options.contentType } : {}),
    };
    try {
      const r = await this.#call("PUT", Key, { body, headers, signal: options?.signal });
      // PutObject answers no Last-Modified; the local clock is close enough for a fresh write.
      return { key, etag: r.headers.etag ?? "", size: body.byteLength, lastModified: new Date() };
    } catch (err) {
      // moto (like AWS) answers If-Match on a key that does not exist with 404 NoSuchKey.
      if ("ifMatch" in condition && isMissingKey(err)) {
        throw new BootsealError("PRECONDITION_FAILED", "object changed or already exists", { cause: err });
      }
      throw mapS3Error(err, this.#bucket);
    }
  }

  /**
   * Whether this server refuses a delete whose condition names another version: a
   * DeleteObject's If-Match (`one`), and a DeleteObjects key's ETag (`batch`, only asked when
   * `one` holds). A probe object under the reserved `.bootseal-` prefix must survive both. Any
   * failure of the probe (no permission to write, a server error) counts as false: the delete
   * then checks with a HEAD first, as on a server that ignores the header, and goes alone.
   */
  #conditionalDeletes(): Promise<{ readonly one: boolean; readonly batch: boolean }> {
    // No caller's signal: the answer is shared, and each call is bounded by the request timeout.
    this.#deleteProbe ??= (async () => {
      // A reserved segment: no key of the store's users can name it, and listings skip it.
      const Key = `${this.#prefix}${RESERVED_SEGMENT_PREFIX}probe/delete-if-match-${randomUUID()}`;
      const wrong = `"${"0".repeat(32)}"`;
      await this.#call("PUT", Key, { body: new TextEncoder().encode("probe") });
      try {
        await this.#call("DELETE", Key, { headers: { "if-match": wrong } });
        return { one: false, batch: false }; // deleted despite the wrong etag
      } catch (err) {
        if (!isLostRace(err)) throw err;
      }
      let batch = false;
      try {
        const refused = await this.#deleteObjects([{ key: Key, etag: wrong }]);
        batch = LOST_RACE_NAMES.has(refused.get(Key) ?? "");
      } catch {
        // DeleteObjects refused or unknown here: deletes go one at a time.
      }
      // It must still be there: a server that deleted it anyway is not one to batch on.
      const kept =
        batch &&
        (await this.#call("HEAD", Key).then(
          () => true,
          (err: unknown) => {
            if (isMissingKey(err)) return false;
            throw err;
          },
        ));
      await this.#call("DELETE", Key).catch(() => {}); // kept, or already gone: either way done
      return { one: true, batch: kept };
    })().catch(() => {
      this.#deleteProbe = undefined; // not known yet: probed again with a later delete
      return { one: false, batch: false };
    });
    return this.#deleteProbe;
  }

  /** One DeleteObjects (`POST /?delete`): the keys it did not delete, with their error codes. */
  async #deleteObjects(entries: readonly ConditionalDelete[]): Promise<ReadonlyMap<string, string>> {
    const { body, contentMd5 } = deleteObjectsRequest(entries);
    try {
      const r = await this.#call("POST", "", {
        body,
        query: { delete: "" },
        headers: { "content-md5": contentMd5, "content-type": "application/xml" },
      });
      return deleteObjectsErrors(Buffer.from(r.body).toString("utf8"));
    } catch (err) {
      throw mapS3Error(err, this.#bucket);
    }
  }

  async delete(key: string, condition?: { ifMatch: string }, options?: CallOptions): Promise<boolean> {
    const Key = fullKey(this.#prefix, key);
    const probed = condition ? await this.#conditionalDeletes() : undefined;
    // A delete with a signal goes alone: a batch cannot be stopped for one of its keys.
    if (condition && probed?.batch && options?.signal === undefined) {
      this.#batcher ??= new DeleteBatcher({
        one: (entry) => this.#deleteOne(entry),
        many: (entries) => this.#deleteObjects(entries),
      });
      return this.#batcher.delete({ key: Key, etag: quoted(condition.ifMatch) });
    }
    if (!condition || !probed?.one) {
      const current = await this.head(key, options);
      if (!current) return false;
      if (condition && unquoted(current.etag) !== unquoted(condition.ifMatch)) {
        throw new BootsealError("PRECONDITION_FAILED", "object changed since it was read");
      }
    }
    return this.#deleteOne({ key: Key, etag: condition && quoted(condition.ifMatch) }, options);
  }

  /**
   * One DeleteObject of the full key `entry.key`, with If-Match when `etag` is set: true when
   * deleted, false when absent (moto's 404; SeaweedFS's 412 for If-Match on a missing key,
   * told from "changed", PRECONDITION_FAILED, by a HEAD).
   */
  async #deleteOne(
    entry: { readonly key: string; readonly etag: string | undefined },
    options?: CallOptions,
  ): Promise<boolean> {
    try {
      await this.#call("DELETE", entry.key, {
        headers: entry.etag === undefined ? {} : { "if-match": entry.etag },
        signal: options?.signal,
      });
      return true;
    } catch (err) {
      if (isMissingKey(err)) return false;
      const gone = async () => !(await this.head(entry.key.slice(this.#prefix.length), options));
      if (entry.etag !== undefined && isLostRace(err) && (await gone())) return false;
      throw mapS3Error(err, this.#bucket);
    }
  }

  async *list(prefix: string, options?: CallOptions): AsyncIterable<ObjectInfo> {
    validateListPrefix(prefix);
    let token: string | undefined;
    do {
      const page = await this.#send(async () => {
        const { sdk, client } = await this.#sdk();
        return client.send(
          new sdk.ListObjectsV2Command({
            Bucket: this.#bucket,
            Prefix: this.#prefix + prefix,
            MaxKeys: this.#pageSize,
            ...(token ? { ContinuationToken: token } : {}),
          }),
          { abortSignal: options?.signal },
        );
      });
      for (const o of page.Contents ?? []) {
        const key = (o.Key ?? "").slice(this.#prefix.length);
        // Objects other tools wrote ("dir/" markers, "a//b") cannot be addressed here: skipped.
        if (!isValidKey(key)) continue;
        yield { key, etag: o.ETag ?? "", size: o.Size ?? 0, lastModified: o.LastModified ?? new Date(0) };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }
}

/** An answer's Last-Modified; the local clock where a server sends none (or one that does not parse). */
function lastModified(headers: Readonly<Record<string, string | undefined>>): Date {
  const at = headers["last-modified"] === undefined ? Number.NaN : Date.parse(headers["last-modified"]);
  return Number.isNaN(at) ? new Date() : new Date(at);
}

/** S3 expects the quoted form; callers may hand back an etag without its quotes. */
function quoted(etag: string): string {
  return etag.startsWith('"') || etag.startsWith("W/") ? etag : `"${etag}"`;
}

function unquoted(etag: string): string {
  return etag.replace(/^W\//, "").replace(/^"(.*)"$/, "$1");
}

// S3 bucket rules (3-63 characters: lower case, digits, '.', '-'; alphanumeric at both ends).
const S3_BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** S3 settings: explicit options, then AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_REGION... */
export function s3Settings(options: S3StoreOptions, env: Env): S3StoreOptions & { region: string } {
  const endpoint =
    checkEndpoint(nonEmpty(options.endpoint), "the S3 endpoint") ??
    checkEndpoint(nonEmpty(env.AWS_ENDPOINT_URL_S3), "AWS_ENDPOINT_URL_S3") ??
    checkEndpoint(nonEmpty(env.AWS_ENDPOINT_URL), "AWS_ENDPOINT_URL");
  const region =
    nonEmpty(options.region) ?? nonEmpty(env.AWS_REGION) ?? nonEmpty(env.AWS_DEFAULT_REGION) ?? "us-east-1";
  // Path-style (http://host/bucket/key) is what MinIO, SeaweedFS and moto serve without DNS
  // set-up, so it is the default whenever a custom endpoint is set.
  const forcePathStyle =
    options.forcePathStyle ??
    parseBool(nonEmpty(env.BOOTSEAL_S3_FORCE_PATH_STYLE), "BOOTSEAL_S3_FORCE_PATH_STYLE") ??
    endpoint !== undefined;
  return { ...options, ...(endpoint ? { endpoint } : {}), region, forcePathStyle };
}

const parseS3Url = (rest: string): BucketLocation<"s3"> =>
  parseBucketUrl("s3", rest, {
    bucket: S3_BUCKET,
    endpointHint: "AWS_ENDPOINT_URL_S3 or the store options",
    example: "s3://BUCKET/PREFIX",
  });

/** What the service configuration's `s3:` section sets. */
export type S3Settings = Pick<S3StoreOptions, "endpoint" | "region" | "forcePathStyle">;

export const s3Scheme: StoreSchemeType<"s3", BucketLocation<"s3">, "s3", S3StoreOptions, S3Settings> = {
  scheme: "s3",
  optionsKey: "s3",
  example: "s3://BUCKET/PREFIX",
  objectExample: "s3://BUCKET/KEY",
  parse: parseS3Url,
  parseObject: (rest, _url, what) => parseBucketObject(rest, what, parseS3Url),
  oneAttempt: (options) => ({ ...options, maxAttempts: 1 }),
  // The SDK's own retries are off: src/retry.ts (through retryingStore) is the only loop.
  open: (location, options, env) =>
    retryingStore(new S3Store(location.bucket, location.prefix, s3Settings(options ?? {}, env)), {
      attempts: options?.maxAttempts ?? 3,
    }),
  settings: {
    properties: {
      endpoint: {
        type: "string",
        minLength: 1,
        description: "MinIO, SeaweedFS, …",
        "x-doc-default": "`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, AWS",
      },
      region: {
        type: "string",
        minLength: 1,
        description: "the bucket's region",
        "x-doc-default": "`AWS_REGION`, `AWS_DEFAULT_REGION`, `us-east-1`",
      },
      forcePathStyle: {
        type: "boolean",
        description: "path-style bucket addressing",
        "x-doc-default": "true when an endpoint is set",
      },
    },
  },
};
