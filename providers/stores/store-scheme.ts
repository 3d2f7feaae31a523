/**
 * The store scheme seam: everything the programs need to know about one scheme (`file`, `s3`,
 * `gs`), declared next to its ObjectStore in the scheme's own file and listed in the registry
 * (index.ts). The fetcher's `--from`, the service's configuration and store, `rotate --store`
 * and the CLI's help texts ask the registry, never a scheme by name.
 */
import type { ObjectStore } from "./object-store.ts";
import type { Env, ObjectLocation } from "./store-url.ts";

/**
 * One setting of a scheme's section in the service configuration: JSON Schema (Ajv checks
 * it), with the configuration's `x-doc-default` annotation for docs/configuration.md.
 */
export interface SettingSchema {
  readonly type: "string" | "boolean" | "integer";
  readonly description: string;
  readonly minLength?: number;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly "x-doc-default"?: string;
}

/**
 * A scheme's section of the service configuration (`s3:` in bootseal.yaml, named by its
 * options key; `BOOTSEAL_S3_ENDPOINT` and the documentation follow from it). `C` is what the
 * section holds; every key of it has a schema here.
 */
export interface SettingsSection<C> {
  readonly properties: { readonly [P in keyof C]-?: SettingSchema };
}

/**
 * One store scheme, in its own file. `K` names its options: the key of StoreOptions and of
 * its configuration section; `O` is what it reads there; `C` the part a service configuration
 * may set (none: no section).
 */
export interface StoreSchemeType<S extends string, L, K extends string, O, C = never> {
  readonly scheme: S;
  readonly optionsKey: K;
  /** How a store URL of this scheme looks, for usage messages: `s3://BUCKET/PREFIX`. */
  readonly example: string;
  /** How an object URL of this scheme looks (`fetch --from`): `s3://BUCKET/KEY`. */
  readonly objectExample: string;
  /** What follows `scheme://` in a store URL; `cwd` anchors relative paths. Throws USAGE. */
  parse(rest: string, cwd: string): L;
  /**
   * What follows `scheme://` in an object URL (`url` is all of it); `what` names where the
   * URL came from (`--from`) for messages. Throws USAGE.
   */
  parseObject(rest: string, url: string, what: string): ObjectLocation;
  /**
   * Its options with one attempt per store call, for a caller whose own loop retries (the
   * fetcher). The SDKs' retries are always off: src/retry.ts is the only loop.
   */
  oneAttempt(options: O | undefined): O;
  /** The store at `location`: settings from `options` first, then `env`; no I/O until the first request. */
  open(location: L, options: O | undefined, env: Env): ObjectStore;
  /** Its section of the service configuration, when it has one. */
  readonly settings?: SettingsSection<C>;
}

/** Any scheme, its own types erased: what the registry holds. */
export type AnyStoreScheme = StoreSchemeType<string, unknown, string, unknown, unknown>;
