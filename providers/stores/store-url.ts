/**
 * Store URLs and object keys, checked in one place so every backend accepts and refuses the
 * same things: `file://DIR`, `s3://BUCKET/PREFIX`, `gs://BUCKET/PREFIX`. A malformed URL is a
 * USAGE error (it comes from a flag or config file); a malformed key is BAD_INPUT (it comes
 * from a request). Messages never repeat a URL, which might hold a credential.
 */
import { resolve, sep } from "node:path";
import { BootsealError } from "../../src/errors.ts";

export type StoreScheme = "file" | "s3" | "gs";

export type StoreLocation =
  /** `dir` is absolute. */
  | { readonly scheme: "file"; readonly dir: string }
  /** `prefix` is "" or ends with "/"; keys are appended to it. */
  | { readonly scheme: "s3" | "gs"; readonly bucket: string; readonly prefix: string };

/** Longest key, in UTF-8 bytes: the S3 and GCS object-name limit. */
export const MAX_KEY_BYTES = 1024;

/**
 * Key segments starting with this are refused everywhere: the file store names its temporary
 * and lock files so, and a key that is valid in one store has to be valid in all of them.
 */
export const RESERVED_SEGMENT_PREFIX = ".bootseal-";

const USAGE_HINT = "expected file://DIR, s3://BUCKET/PREFIX or gs://BUCKET/PREFIX";

// C0 and C1 controls, DEL, and lone UTF-16 surrogates (which have no UTF-8 form).
const UNPRINTABLE =
  /[\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

// S3 bucket rules (3-63 characters: lower case, digits, '.', '-'; alphanumeric at both ends).
const S3_BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
// GCS adds '_' and allows up to 222 characters when the name has dots (63 per dot-separated part).
const GS_BUCKET = /^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$/;

function usage(message: string): BootsealError {
  return new BootsealError("USAGE", message);
}

export function parseStoreUrl(url: string, cwd: string = process.cwd()): StoreLocation {
  if (UNPRINTABLE.test(url) || /\s/.test(url)) throw usage("store URL contains spaces or control characters");
  const match = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(.*)$/s.exec(url);
  if (!match) throw usage(`malformed store URL: ${USAGE_HINT}`);
  const scheme = match[1]!.toLowerCase();
  const rest = match[2]!;
  if (rest.includes("?") || rest.includes("#")) {
    throw usage("store URLs take no query string or fragment: endpoint and options come from flags or env");
  }
  if (scheme === "file") return parseFile(rest, cwd);
  if (scheme === "s3" || scheme === "gs") return parseBucket(scheme, rest);
  const hint = scheme === "gcs" ? " (use gs://)" : scheme === "minio" ? " (use s3:// with an endpoint)" : "";
  throw usage(`unknown store scheme "${scheme}"${hint}: ${USAGE_HINT}`);
}

function parseFile(rest: string, cwd: string): StoreLocation {
  if (rest === "")
    throw usage("file:// needs a directory, e.g. file://./data/store or file:///var/lib/bootseal");
  // `.` is fine (file://./data/store is the embedded default); `..` would let a URL climb out
  // of the directory an operator thinks it names.
  if (rest.split("/").includes("..")) throw usage("'..' is not allowed in a store URL");
  const dir = resolve(cwd, rest);
  if (dir === sep || dir === resolve(sep)) throw usage("refusing the file system root as a store directory");
  return { scheme: "file", dir };
}

function parseBucket(scheme: "s3" | "gs", rest: string): StoreLocation {
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
      `a store URL names a bucket, not a host or port: set the endpoint with ${endpointHint(scheme)}`,
    );
  }
  if (bucket === "") throw usage(`${scheme}:// needs a bucket: ${USAGE_HINT}`);
  const rule = scheme === "s3" ? S3_BUCKET : GS_BUCKET;
  if (!rule.test(bucket) || bucket.includes("..")) throw usage(`invalid ${scheme} bucket name "${bucket}"`);
  return { scheme, bucket, prefix: parsePrefix(path) };
}

function endpointHint(scheme: "s3" | "gs"): string {
  return scheme === "s3"
    ? "AWS_ENDPOINT_URL_S3 or the store options"
    : "STORAGE_EMULATOR_HOST or the store options";
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
export function formatStoreUrl(location: StoreLocation): string {
  if (location.scheme === "file") return `file://${location.dir}`;
  const prefix = location.prefix.endsWith("/") ? location.prefix.slice(0, -1) : location.prefix;
  return `${location.scheme}://${location.bucket}${prefix ? `/${prefix}` : ""}`;
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
