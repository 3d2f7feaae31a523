/**
 * The store scheme registry. A new scheme is one file exporting a StoreSchemeType
 * (store-scheme.ts: store and object URL parsing, the one-attempt switch, settings from
 * options and the environment, its configuration section, the store) plus one line in
 * BUILT_IN_SCHEMES. The programs ask STORE_SCHEMES: the fetcher's `--from`, the service's
 * configuration schema and store, `rotate --store` and the CLI's help texts. Opening does no
 * I/O; the first request does. No SDK loads with the registry: each store loads its own with
 * its first request.
 */
import { fileScheme } from "./file.ts";
import { gcsScheme } from "./gcs.ts";
import type { ObjectStore } from "./object-store.ts";
import { s3Scheme } from "./s3.ts";
import type { AnyStoreScheme, StoreSchemeType } from "./store-scheme.ts";
import type { ObjectLocation } from "./store-url.ts";
import { type Env, schemeOf, splitStoreUrl, usage } from "./store-url.ts";

// The global, not `node:process`: importing that module as ESM evaluates its lazy getters
// (process.stdin among them), which costs every CLI run start-up time.
const processEnv = process.env;

export type { FileStoreOptions } from "./file.ts";
export { type GcsStoreOptions, gcsSettings } from "./gcs.ts";
export { type S3Credentials, type S3Settings, type S3StoreOptions, s3Settings } from "./s3.ts";
export type { AnyStoreScheme, StoreSchemeType } from "./store-scheme.ts";
export type { ObjectLocation } from "./store-url.ts";

/** The schemes of this package, in the order usage messages list them. */
const BUILT_IN_SCHEMES = [fileScheme, s3Scheme, gcsScheme] as const;

const schemes: AnyStoreScheme[] = [...BUILT_IN_SCHEMES];

/** Every scheme: the built-in ones, then any registered with registerStoreScheme. */
export const STORE_SCHEMES: readonly AnyStoreScheme[] = schemes;

/**
 * Adds a scheme defined outside this package (the registry test's own). A scheme of the
 * package is a line in BUILT_IN_SCHEMES instead. What reads the registry when it loads (the
 * configuration schema, the CLI's flag tables) sees only schemes registered before it is imported.
 */
export function registerStoreScheme(type: AnyStoreScheme): void {
  if (schemes.some((s) => s.scheme === type.scheme || s.optionsKey === type.optionsKey)) {
    throw new Error(`store scheme ${type.scheme}:// (options ${type.optionsKey}) is registered already`);
  }
  schemes.push(type);
}

type BuiltIn = (typeof BUILT_IN_SCHEMES)[number];
export type StoreScheme = BuiltIn["scheme"];
export type StoreLocation = ReturnType<BuiltIn["parse"]>;

/** Each scheme's options, under its options key. */
type SchemeOptions = { readonly [T in BuiltIn as T["optionsKey"]]?: Parameters<T["open"]>[1] };

export interface StoreOptions extends SchemeOptions {
  /** Where relative file:// paths start (default: the working directory). */
  readonly cwd?: string;
  /** Environment to read defaults from (default: process.env); tests pass their own. */
  readonly env?: Env;
  /** One attempt per store call: the caller's own loop retries (the fetcher). */
  readonly oneAttempt?: boolean;
}

type SettingsEntry<T> =
  T extends StoreSchemeType<string, unknown, infer K, unknown, infer C>
    ? [C] extends [never]
      ? never
      : [K, C]
    : never;

/** The service configuration's store sections: each scheme with `settings`, under its options key. */
export type StoreSettings = { readonly [E in SettingsEntry<BuiltIn> as E[0]]: E[1] };

/** The store sections of a service configuration (ServiceConfig extends StoreSettings), as openStore's options. */
export function storeSettingsOf(config: object): StoreSettings {
  const sections = config as Readonly<Record<string, unknown>>;
  return Object.fromEntries(
    STORE_SCHEMES.filter((s) => s.settings !== undefined).map((s) => [s.optionsKey, sections[s.optionsKey]]),
  ) as StoreSettings;
}

/** `a, b or c`: how usage messages list alternatives. */
export function oneOf(items: readonly string[]): string {
  return items.join(", ").replace(/, ([^,]*)$/, " or $1");
}

/** How each scheme's store URL looks: `file://DIR`, `s3://BUCKET/PREFIX`, … */
export function storeUrlExamples(): string[] {
  return STORE_SCHEMES.map((s) => s.example);
}

/** How each scheme's object URL looks (`fetch --from`): `file:///PATH`, `s3://BUCKET/KEY`, … */
export function objectUrlExamples(): string[] {
  return STORE_SCHEMES.map((s) => s.objectExample);
}

/** Names people try for a scheme we spell otherwise. */
const ALIASES: Readonly<Record<string, string>> = {
  gcs: " (use gs://)",
  minio: " (use s3:// with an endpoint)",
};

const usageHint = (): string => `expected ${oneOf(storeUrlExamples())}`;

function schemeType(scheme: string): AnyStoreScheme {
  const found = STORE_SCHEMES.find((s) => s.scheme === scheme);
  if (found === undefined)
    throw usage(`unknown store scheme "${scheme}"${ALIASES[scheme] ?? ""}: ${usageHint()}`);
  return found;
}

/** The location a store URL names; USAGE error when malformed. */
export function parseStoreUrl(url: string, cwd: string = process.cwd()): StoreLocation {
  const { scheme, rest } = splitStoreUrl(url, usageHint());
  // A built-in scheme's location; a registered one's is its own type.
  return schemeType(scheme).parse(rest, cwd) as StoreLocation;
}

/** Opens `file://DIR`, `s3://BUCKET/PREFIX`, `gs://BUCKET/PREFIX`, …; USAGE error when malformed. */
export function openStore(url: string, options: StoreOptions = {}): ObjectStore {
  const { scheme, rest } = splitStoreUrl(url, usageHint());
  const type = schemeType(scheme);
  const own = (options as Readonly<Record<string, unknown>>)[type.optionsKey];
  return type.open(
    type.parse(rest, options.cwd ?? process.cwd()),
    options.oneAttempt ? type.oneAttempt(own) : own,
    options.env ?? processEnv,
  );
}

/**
 * The object an object URL names (`s3://BUCKET/KEY`, `file:///PATH`): its store and key;
 * undefined when the URL's scheme is no store's. `what` names where the URL came from
 * (`--from`) in messages. USAGE error when malformed.
 */
export function parseObjectUrl(url: string, what: string): ObjectLocation | undefined {
  const split = schemeOf(url);
  if (split === undefined) return undefined;
  return STORE_SCHEMES.find((s) => s.scheme === split.scheme)?.parseObject(split.rest, url, what);
}
