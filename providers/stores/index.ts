/**
 * The store registry: URL scheme -> factory. `openStore` parses the URL (store-url.ts), fills
 * S3 and GCS settings from explicit options first, then the environment variables the AWS and
 * Google tools use, and returns the store. Opening does no I/O; the first request does.
 */
import { BootsealError } from "../../src/errors.ts";
import { FileStore, type FileStoreOptions } from "./file.ts";
import { GcsStore, type GcsStoreOptions } from "./gcs.ts";
import type { ObjectStore } from "./object-store.ts";
import { retryingStore } from "./retrying.ts";
import { S3Store, type S3StoreOptions } from "./s3.ts";
import { parseStoreUrl, type StoreLocation, type StoreScheme } from "./store-url.ts";

// The global, not `node:process`: importing that module as ESM evaluates its lazy getters
// (process.stdin among them), which costs every CLI run start-up time.
const processEnv = process.env;

export type { FileStoreOptions } from "./file.ts";
export type { GcsStoreOptions } from "./gcs.ts";
export type { S3Credentials, S3StoreOptions } from "./s3.ts";
export { parseStoreUrl, type StoreLocation, type StoreScheme } from "./store-url.ts";

export interface StoreOptions {
  readonly s3?: S3StoreOptions;
  readonly gcs?: GcsStoreOptions;
  readonly file?: FileStoreOptions;
  /** Where relative file:// paths start (default: the working directory). */
  readonly cwd?: string;
  /** Environment to read defaults from (default: process.env); tests pass their own. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

type Env = Readonly<Record<string, string | undefined>>;
type Factory = (location: StoreLocation, options: StoreOptions, env: Env) => ObjectStore;

const FACTORIES: Record<StoreScheme, Factory> = {
  file: (loc, options) => new FileStore(loc.scheme === "file" ? loc.dir : "", options.file),
  s3: (loc, options, env) =>
    loc.scheme === "s3"
      ? new S3Store(loc.bucket, loc.prefix, s3Settings(options.s3 ?? {}, env))
      : unreachable(),
  gs: (loc, options, env) =>
    loc.scheme === "gs"
      ? new GcsStore(loc.bucket, loc.prefix, gcsSettings(options.gcs ?? {}, env))
      : unreachable(),
};

function unreachable(): never {
  throw new BootsealError("INTERNAL", "store scheme mismatch");
}

/** Opens `file://DIR`, `s3://BUCKET/PREFIX` or `gs://BUCKET/PREFIX`; USAGE error when malformed. */
export function openStore(url: string, options: StoreOptions = {}): ObjectStore {
  const location = parseStoreUrl(url, options.cwd);
  const store = FACTORIES[location.scheme](location, options, options.env ?? processEnv);
  // The network stores retry in src/retry.ts (their SDKs' own loops are off); a file store
  // fails for reasons another attempt does not fix.
  if (location.scheme === "s3") return retryingStore(store, { attempts: options.s3?.maxAttempts ?? 3 });
  if (location.scheme === "gs") return retryingStore(store, { attempts: (options.gcs?.maxRetries ?? 1) + 1 });
  return store;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

/** An endpoint must be a plain http(s) URL; messages name the variable, never its value. */
function checkEndpoint(value: string | undefined, source: string): string | undefined {
  if (value === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new BootsealError("USAGE", `${source} is not a URL`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new BootsealError("USAGE", `${source} must be an http:// or https:// URL`);
  }
  if (parsed.username || parsed.password) {
    throw new BootsealError("USAGE", `${source} must not carry credentials`);
  }
  return value;
}

function parseBool(value: string | undefined, source: string): boolean | undefined {
  if (value === undefined) return undefined;
  const v = value.toLowerCase();
  if (["1", "true", "yes", "on"].includes(v)) return true;
  if (["0", "false", "no", "off"].includes(v)) return false;
  throw new BootsealError("USAGE", `${source} must be true or false`);
}

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
