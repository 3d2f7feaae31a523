/**
 * Where a file may be written. Every path is absolute and taken relative to --root (default
 * /), as a chroot would: `/etc/kubernetes/x` with --root /mnt/img is /mnt/img/etc/kubernetes/x.
 * A path is allowed when both the path as written and the path after resolving every
 * existing component lie under one of the allowed roots (default /etc, /var/lib, /run, /opt,
 * also relative to --root). Symbolic links among the existing directories are followed the
 * way the booted machine would see them (absolute targets start again at --root; a target
 * that climbs above --root is refused); the file itself must not be a symbolic link, a
 * directory or anything but a regular file. `..` and `.` segments are refused outright.
 *
 * The result names real directories only, so the writer (atomic-write.ts) can create its
 * temporary file with O_NOFOLLOW in a directory whose path holds no link, and check again
 * right before the rename that the directory is still where it was.
 */
import type { Stats } from "node:fs";
import { lstat, readlink, realpath, stat } from "node:fs/promises";
import { join } from "node:path";
import { BootsealError } from "../errors.ts";

export const DEFAULT_ALLOWED_ROOTS: readonly string[] = ["/etc", "/var/lib", "/run", "/opt"];

/** Symbolic links followed while resolving one path (Linux's MAXSYMLINKS). */
const MAX_LINKS = 40;

/** The longest path accepted, in UTF-8 bytes (Linux's PATH_MAX), as written and as resolved. */
export const MAX_PATH_BYTES = 4096;
/** The longest single path component, in UTF-8 bytes (NAME_MAX). */
export const MAX_SEGMENT_BYTES = 255;
/** The most components a path may have, file name included. */
export const MAX_PATH_DEPTH = 64;

export interface PathPolicy {
  /** Real path of --root on this host. */
  readonly root: string;
  /** Logical absolute paths (as seen under --root), normalised, no trailing slash. */
  readonly allowedRoots: readonly string[];
}

export interface ResolvedTarget {
  /** The path as requested (logical, under --root). */
  readonly requested: string;
  /** The path after resolving links (logical, under --root). */
  readonly logical: string;
  /** Host path of the target file. */
  readonly hostPath: string;
  /** Host path of the directory it goes in. */
  readonly hostDir: string;
  /** Host paths of directories to create first, outermost first. */
  readonly missingDirs: readonly string[];
  /** The existing regular file being replaced, if any. */
  readonly existing: Stats | null;
}

/** A path for a message: quoted, and cut short when long (a hostile path can be kilobytes). */
export function displayPath(path: string): string {
  const shown = path.length > 120 ? `${path.slice(0, 120)}…` : path;
  return JSON.stringify(shown);
}

function refuse(path: string, why: string): BootsealError {
  return new BootsealError("PATH_NOT_ALLOWED", `refusing to write ${displayPath(path)}: ${why}`);
}

/** The length and depth caps, on a path already split into segments. */
function checkSize(path: string, segments: readonly string[], shown = path, how = ""): void {
  const bytes = Buffer.byteLength(path, "utf8");
  if (bytes > MAX_PATH_BYTES) throw refuse(shown, `${how}${bytes} bytes long, more than ${MAX_PATH_BYTES}`);
  if (segments.length > MAX_PATH_DEPTH) {
    throw refuse(shown, `${how}${segments.length} components deep, more than ${MAX_PATH_DEPTH}`);
  }
  segments.forEach((s, i) => {
    const n = Buffer.byteLength(s, "utf8");
    if (n > MAX_SEGMENT_BYTES) {
      throw refuse(shown, `${how}component ${i + 1} is ${n} bytes long, more than ${MAX_SEGMENT_BYTES}`);
    }
  });
}

/**
 * Splits an absolute logical path into segments; refuses relative paths, `.`, `..`, NUL, and
 * paths over the caps (MAX_PATH_BYTES, MAX_SEGMENT_BYTES, MAX_PATH_DEPTH).
 */
export function pathSegments(path: string): string[] {
  if (!path.startsWith("/")) throw refuse(path, "not an absolute path");
  if (path.includes("\0")) throw refuse(path, "contains a NUL byte");
  const segments = path.split("/").filter((s) => s !== "");
  checkSize(path, segments);
  for (const s of segments) {
    if (s === ".." || s === ".") throw refuse(path, "'.' and '..' segments are not allowed");
  }
  return segments;
}

function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

async function lstatOrNull(path: string): Promise<Stats | null> {
  try {
    return await lstat(path);
  } catch (err) {
    if (errnoOf(err) === "ENOENT") return null;
    throw new BootsealError("IO_ERROR", `cannot inspect ${path} (${errnoOf(err) ?? "error"})`, {
      cause: err,
    });
  }
}

/** Parses and normalises the allowed roots ("/etc,/var/lib"); "/" alone allows everything. */
export function parseAllowedRoots(text: string): string[] {
  const roots = text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (roots.length === 0) throw new BootsealError("USAGE", "--allowed-roots needs at least one directory");
  return roots.map((r) => {
    if (!r.startsWith("/")) throw new BootsealError("USAGE", `--allowed-roots: ${r} is not absolute`);
    const segs = r.split("/").filter((s) => s !== "");
    if (segs.some((s) => s === "." || s === ".."))
      throw new BootsealError("USAGE", `--allowed-roots: ${r} holds '.' or '..'`);
    return `/${segs.join("/")}`;
  });
}

/** The real path of --root; it must be an existing directory. */
export async function rootDirectory(root: string): Promise<string> {
  try {
    const real = await realpath(root);
    if (!(await stat(real)).isDirectory()) throw new Error("not a directory");
    return real;
  } catch (err) {
    throw new BootsealError("USAGE", `--root ${root} is not an existing directory`, { cause: err });
  }
}

/** Strictly below one of the roots: a file never takes the place of an allowed root itself. */
function under(path: string, roots: readonly string[]): boolean {
  return roots.some((r) => r === "/" || path.startsWith(`${r}/`));
}

/**
 * Resolves the directory segments of a logical path under the root, following links the
 * way the booted machine would. Returns the resolved logical segments and how many of them
 * (from the end) do not exist yet.
 */
async function resolveDirs(
  requested: string,
  dirSegments: readonly string[],
  root: string,
): Promise<{ segments: string[]; missing: number }> {
  const pending = [...dirSegments];
  const cur: string[] = [];
  let missing = 0;
  let links = 0;
  while (pending.length > 0) {
    const seg = pending.shift() as string;
    if (seg === "." || seg === "") continue;
    if (seg === "..") {
      // Only link targets bring `..` here (requested paths refuse it).
      if (missing > 0) throw refuse(requested, "a link climbs out of a directory that does not exist");
      if (cur.length === 0) throw refuse(requested, "a symbolic link leads above --root");
      cur.pop();
      continue;
    }
    if (missing > 0) {
      cur.push(seg);
      missing++;
      continue;
    }
    const host = join(root, ...cur, seg);
    const info = await lstatOrNull(host);
    if (info === null) {
      cur.push(seg);
      missing = 1;
    } else if (info.isSymbolicLink()) {
      if (++links > MAX_LINKS) throw refuse(requested, "too many levels of symbolic links");
      const target = await readlink(host);
      if (target.startsWith("/")) cur.length = 0;
      pending.unshift(...target.split("/"));
    } else if (info.isDirectory()) {
      cur.push(seg);
    } else {
      throw refuse(requested, `/${[...cur, seg].join("/")} is not a directory`);
    }
  }
  return { segments: cur, missing };
}

/** Resolves one requested path against the policy, or throws PATH_NOT_ALLOWED. */
export async function resolveTarget(requested: string, policy: PathPolicy): Promise<ResolvedTarget> {
  const segments = pathSegments(requested);
  const name = segments.pop();
  if (name === undefined) throw refuse(requested, "names no file");
  const logicalRequested = `/${[...segments, name].join("/")}`;
  if (!under(logicalRequested, policy.allowedRoots)) {
    throw refuse(requested, `outside the allowed roots (${policy.allowedRoots.join(", ")})`);
  }
  const { segments: dir, missing } = await resolveDirs(requested, segments, policy.root);
  const logical = `/${[...dir, name].join("/")}`;
  // A link may lengthen a short path: the resolved one is held to the same caps.
  if (logical !== logicalRequested) checkSize(logical, [...dir, name], requested, "resolved through links, ");
  if (!under(logical, await resolvedAllowedRoots(policy))) {
    throw refuse(requested, `a symbolic link leads to ${logical}, outside the allowed roots`);
  }
  const hostDir = join(policy.root, ...dir);
  const hostPath = join(hostDir, name);
  const missingDirs: string[] = [];
  for (let i = dir.length - missing + 1; i <= dir.length; i++)
    missingDirs.push(join(policy.root, ...dir.slice(0, i)));
  const existing = missing > 0 ? null : await lstatOrNull(hostPath);
  if (existing !== null) {
    if (existing.isSymbolicLink()) throw refuse(requested, "the file is a symbolic link");
    if (!existing.isFile()) throw refuse(requested, "exists and is not a regular file");
  }
  return { requested: logicalRequested, logical, hostPath, hostDir, missingDirs, existing };
}

const rootCache = new WeakMap<PathPolicy, Promise<string[]>>();

/** The allowed roots, each also as it resolves under --root (an image may link /opt elsewhere). */
function resolvedAllowedRoots(policy: PathPolicy): Promise<string[]> {
  let cached = rootCache.get(policy);
  if (cached === undefined) {
    cached = (async () => {
      const out = new Set(policy.allowedRoots);
      for (const r of policy.allowedRoots) {
        if (r === "/") continue;
        try {
          const { segments } = await resolveDirs(r, pathSegments(r), policy.root);
          out.add(`/${segments.join("/")}`);
        } catch {
          // a root that does not resolve (a file in the way) only allows its literal path
        }
      }
      return [...out];
    })();
    rootCache.set(policy, cached);
  }
  return cached;
}
