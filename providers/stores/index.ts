/**
 * The store scheme registry. A new scheme is one file exporting a StoreSchemeType (URL
 * parsing, settings from options and the environment, the store) plus one line in
 * STORE_SCHEMES and its options in StoreOptions. Opening does no I/O; the first request does.
 */
import { type FileStoreOptions, fileScheme } from "./file.ts";
import { type GcsStoreOptions, gcsScheme } from "./gcs.ts";
import type { ObjectStore } from "./object-store.ts";
import { type S3StoreOptions, s3Scheme } from "./s3.ts";
import { type StoreSchemeType, splitStoreUrl, usage } from "./store-url.ts";

// The global, not `node:process`: importing that module as ESM evaluates its lazy getters
// (process.stdin among them), which costs every CLI run start-up time.
const processEnv = process.env;

export type { FileStoreOptions } from "./file.ts";
export { type GcsStoreOptions, gcsSettings } from "./gcs.ts";
export { type S3Credentials, type S3StoreOptions, s3Settings } from "./s3.ts";

export const STORE_SCHEMES = [fileScheme, s3Scheme, gcsScheme] as const;

type AnyScheme = (typeof STORE_SCHEMES)[number];
export type StoreScheme = AnyScheme["scheme"];
export type StoreLocation = ReturnType<AnyScheme["parse"]>;

export interface StoreOptions {
  readonly s3?: S3StoreOptions;
  readonly gcs?: GcsStoreOptions;
  readonly file?: FileStoreOptions;
  /** Where relative file:// paths start (default: the working directory). */
  readonly cwd?: string;
  /** Environment to read defaults from (default: process.env); tests pass their own. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

const USAGE_HINT = `expected ${STORE_SCHEMES.map((s) => s.example)
  .join(", ")
  .replace(/, ([^,]*)$/, " or $1")}`;

/** Names people try for a scheme we spell otherwise. */
const ALIASES: Readonly<Record<string, string>> = {
  gcs: " (use gs://)",
  minio: " (use s3:// with an endpoint)",
};

function schemeOf(scheme: string): AnyScheme {
  const found = STORE_SCHEMES.find((s) => s.scheme === scheme);
  if (found === undefined)
    throw usage(`unknown store scheme "${scheme}"${ALIASES[scheme] ?? ""}: ${USAGE_HINT}`);
  return found;
}

/** The location a store URL names; USAGE error when malformed. */
export function parseStoreUrl(url: string, cwd: string = process.cwd()): StoreLocation {
  const { scheme, rest } = splitStoreUrl(url, USAGE_HINT);
  return schemeOf(scheme).parse(rest, cwd);
}

/** Opens `file://DIR`, `s3://BUCKET/PREFIX` or `gs://BUCKET/PREFIX`; USAGE error when malformed. */
export function openStore(url: string, options: StoreOptions = {}): ObjectStore {
  const { scheme, rest } = splitStoreUrl(url, USAGE_HINT);
  // TypeScript cannot tie a union member's parse result to the same member's open; each
  // scheme's open receives exactly what its own parse returned.
  const type = schemeOf(scheme) as StoreSchemeType<string, StoreLocation, StoreOptions>;
  return type.open(type.parse(rest, options.cwd ?? process.cwd()), options, options.env ?? processEnv);
}
