/**
 * What every store scheme shares: splitting `scheme://rest`, bucket-style URLs (s3://, gs://),
 * endpoint and flag checks for settings, and object keys, checked in one place so every backend
 * accepts and refuses the same things. Each scheme's own parsing and settings live in its file
 * (file.ts, s3.ts, gcs.ts); index.ts is the scheme registry. A malformed URL is a USAGE error
 * (it comes from a flag or config file); a malformed key is BAD_INPUT (it comes from a request).
 * Messages never repeat a URL, which might hold a credential.
 */
import { BootsealError } from "../../src/errors.ts";

export type Env = Readonly<Record<string, string | undefined>>;

/** One object an object URL names (`bootseal fetch --from s3://BUCKET/KEY`). */
export interface ObjectLocation {
  /** The store holding it: a URL openStore takes. */
  readonly storeUrl: string;
  /** Its key in that store. */
  readonly key: string;
  /** Its URL as messages and log lines show it. */
  readonly display: string;
  /** Where a store layout (`…/configs/<ns>/<name>`) would show: a file's path, a bucket key. */
  readonly path: string;
  /** What `path` is called in messages: "path", "key". */
  readonly pathName: string;
}

/** `dir` is absolute. */
export interface FileLocation {
  readonly scheme: "file";
  readonly dir: string;
}

/** `prefix` is "" or ends with "/"; keys are appended to it. */
export interface BucketLocation<S extends string = string> {
  readonly scheme: S;
  readonly bucket: string;
  readonly prefix: string;
}

/** Longest key, in UTF-8 bytes: the S3 and GCS object-name limit. */
export const MAX_KEY_BYTES = 1024;

/**
 * Key segments starting with this are refused everywhere: the file store names its temporary
 * and lock files so, and a key that is valid in one store has to be valid in all of them.
 */
export const RESERVED_SEGMENT_PREFIX = ".bootseal-";

// C0 and C1 controls, DEL, and lone UTF-16 surrogates (which have no UTF-8 form).
const UNPRINTABLE =
  /[\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export function usage(message: string): BootsealError {
  return new BootsealError("USAGE", message);
}

const SCHEME_URL = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(.*)$/s;

/** `scheme://rest` as written, the scheme lower-cased; undefined when the text has no scheme. */
export function schemeOf(url: string): { scheme: string; rest: string } | undefined {
  const match = SCHEME_URL.exec(url);
  return match ? { scheme: match[1]!.toLowerCase(), rest: match[2]! } : undefined;
}

function checkPrintable(text: string): void {
  if (UNPRINTABLE.test(text) || /\s/.test(text))
    throw usage("store URL contains spaces or control characters");
}

function checkNoQuery(rest: string): string {
  if (rest.includes("?") || rest.includes("#")) {
    throw usage("store URLs take no query string or fragment: endpoint and options come from flags or env");
  }
  return rest;
}

/** `scheme://rest` with the checks every scheme shares; the scheme lower-cased. */
export function splitStoreUrl(url: string, hint: string): { scheme: string; rest: string } {
  checkPrintable(url);
  const split = schemeOf(url);
  if (!split) throw usage(`malformed store URL: ${hint}`);
  return { scheme: split.scheme, rest: checkNoQuery(split.rest) };
}

/**
 * The object a bucket URL names (`s3://BUCKET/KEY`, after `scheme://`): the bucket is the
 * store, the rest its key. `parse` is the scheme's store-URL parser; the checks are splitStoreUrl's.
 */
export function parseBucketObject<S extends string>(
  rest: string,
  what: string,
  parse: (rest: string) => BucketLocation<S>,
): ObjectLocation {
  checkPrintable(rest);
  const location = parse(checkNoQuery(rest));
  if (location.prefix === "") throw usage(`${what} ${location.scheme}:// wants a bucket and an object key`);
  const key = location.prefix.slice(0, -1);
  const storeUrl = `${location.scheme}://${location.bucket}`;
  return { storeUrl, key, display: `${storeUrl}/${key}`, path: key, pathName: "key" };
}

export interface BucketRules {
  /** Valid bucket names of the service. */
  readonly bucket: RegExp;
  /** Where the endpoint is set instead, for the host:port message. */
  readonly endpointHint: string;
  readonly example: string;
}

/** `BUCKET[/PREFIX[/]]` after `scheme://`. */
export function parseBucketUrl<S extends string>(
  scheme: S,
  rest: string,
  rules: BucketRules,
): BucketLocation<S> {
  const slash = rest.indexOf("/");
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? "" : rest.slice(slash + 1);
  if (bucket.includes("@")) {
    throw usage(
      "credentials do not belong in a store URL: use the environment or the SDK's credential chain",
    );
  }
  if (bucket.includes(":")) {
    throw usage(
      `a store URL names a bucket, not a host or port: set the endpoint with ${rules.endpointHint}`,
    );
  }
  if (bucket === "") throw usage(`${scheme}:// needs a bucket: expected ${rules.example}`);
  if (!rules.bucket.test(bucket) || bucket.includes(".."))
    throw usage(`invalid ${scheme} bucket name "${bucket}"`);
  return { scheme, bucket, prefix: parsePrefix(path) };
}

/** The path after the bucket: "" or "a/b/" (a trailing slash is optional in the URL). */
function parsePrefix(path: string): string {
  if (path === "") return "";
  const trimmed = path.endsWith("/") ? path.slice(0, -1) : path;
  for (const segment of trimmed.split("/")) {
    if (segment === "") throw usage("empty path segment ('//') in store URL");
    if (segment === "." || segment === "..") throw usage("'.' and '..' are not allowed in a store URL");
  }
  if (Buffer.byteLength(trimmed) >= MAX_KEY_BYTES) throw usage("store URL prefix is too long");
  return `${trimmed}/`;
}

/** The canonical URL of a location, as stores report it in `url`. */
export function formatStoreUrl(location: FileLocation | BucketLocation): string {
  if ("dir" in location) return `${location.scheme}://${location.dir}`;
  const prefix = location.prefix.endsWith("/") ? location.prefix.slice(0, -1) : location.prefix;
  return `${location.scheme}://${location.bucket}${prefix ? `/${prefix}` : ""}`;
}

export function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

/** An endpoint must be a plain http(s) URL; messages name the variable, never its value. */
export function checkEndpoint(value: string | undefined, source: string): string | undefined {
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

export function parseBool(value: string | undefined, source: string): boolean | undefined {
  if (value === undefined) return undefined;
  const v = value.toLowerCase();
  if (["1", "true", "yes", "on"].includes(v)) return true;
  if (["0", "false", "no", "off"].includes(v)) return false;
  throw new BootsealError("USAGE", `${source} must be true or false`);
}

function badKey(what: string, key: string, reason: string): BootsealError {
  const shown = JSON.stringify(key.length > 80 ? `${key.slice(0, 80)}…` : key);
  return new BootsealError("BAD_INPUT", `invalid object ${what} ${shown}: ${reason}`);
}

function checkSegments(what: string, key: string, segments: readonly string[]): void {
  for (const segment of segments) {
    if (segment === "") throw badKey(what, key, "empty path segment");
    if (segment === "." || segment === "..") throw badKey(what, key, "'.' and '..' segments are not allowed");
    if (segment.startsWith(RESERVED_SEGMENT_PREFIX)) {
      throw badKey(what, key, `segments starting with '${RESERVED_SEGMENT_PREFIX}' are reserved`);
    }
  }
}

function checkCharacters(what: string, key: string): void {
  if (UNPRINTABLE.test(key)) throw badKey(what, key, "control characters are not allowed");
  // A backslash is a path separator on Windows: refused so a key means the same file everywhere.
  if (key.includes("\\")) throw badKey(what, key, "backslashes are not allowed");
  if (key.startsWith("/")) throw badKey(what, key, "must not start with '/'");
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw badKey(what, key, `longer than ${MAX_KEY_BYTES} bytes`);
}

/**
 * Checks an object key (relative to the store's prefix): non-empty, no leading '/', no empty,
 * '.' or '..' segments, printable, at most 1024 UTF-8 bytes. Throws BAD_INPUT.
 */
export function validateKey(key: string): string {
  if (typeof key !== "string" || key === "") throw badKey("key", String(key), "empty");
  checkCharacters("key", key);
  checkSegments("key", key, key.split("/"));
  return key;
}

/**
 * Checks a list prefix: "" (everything), a directory-like prefix ending in '/', or any leading
 * part of a key ("configs/ns/na"). Same rules as keys, except that it may be empty and may end
 * with '/'.
 */
export function validateListPrefix(prefix: string): string {
  if (typeof prefix !== "string") throw badKey("prefix", String(prefix), "not a string");
  if (prefix === "") return prefix;
  checkCharacters("prefix", prefix);
  const segments = prefix.split("/");
  if (prefix.endsWith("/")) segments.pop();
  checkSegments("prefix", prefix, segments);
  return prefix;
}

/** True when `key` is one this interface can address (used to skip foreign objects in listings). */
export function isValidKey(key: string): boolean {
  try {
    validateKey(key);
    return true;
  } catch {
    return false;
  }
}

/** Joins the store prefix and a validated key, refusing names past the provider limit. */
export function fullKey(prefix: string, key: string): string {
  const name = prefix + validateKey(key);
  if (Buffer.byteLength(name) > MAX_KEY_BYTES) {
    throw badKey("key", key, `longer than ${MAX_KEY_BYTES} bytes with the store prefix`);
  }
  return name;
}

/**
 * The comparable value of an etag a caller hands back: HTTP clients may add or drop the quotes
 * (RFC 9110 strong etags are quoted), so `"abc"` and `abc` name the same version.
 */
export function etagValue(etag: string): string {
  return etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"') ? etag.slice(1, -1) : etag;
}

/** Byte-wise (UTF-8) order, the order S3 and GCS list in. */
export function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
