/**
 * Writing the files of one run all or nothing.
 *
 * `planFiles` checks the whole manifest before the first write: every path resolved against
 * the policy (paths.ts, with its length and depth caps), every owner known, every mode safe,
 * and the entries checked against each other: no file listed twice (under any spelling, links
 * included) and no file that another entry needs as a directory (`/etc/pa` and `/etc/pa/x`, in
 * either order). Any refusal comes before anything is written.
 *
 * `applyPlan` then writes the files in order. Before a file that exists is replaced, it keeps
 * the old one: a hard link to it beside it (same inode: bytes, mode, owner, label unchanged),
 * or, where the file system refuses hard links, a copy of its bytes, mode and owner in memory.
 * When any write fails, what this run did is undone, newest first: replaced files get their
 * old version back, created files are removed, created directories removed (when empty). On
 * success the kept versions are dropped. A `kill -9` in the middle can leave a kept version
 * (`.NAME.bootseal-keep-RANDOM.tmp`, the old file under the old mode) beside its file.
 */
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { link, lstat, open, rename, rmdir, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { BootsealError } from "../errors.ts";
import {
  type FileLabeler,
  makeDirectories,
  syncDirectory,
  type WriteTarget,
  writeFileAtomic,
} from "../files/atomic-write.ts";
import { describeBytes, MAX_DOCUMENT_BYTES } from "../limits.ts";
import type { FileSpec } from "./apply-manifest.ts";
import { type Accounts, resolveOwnership } from "./owners.ts";
import { displayPath, type PathPolicy, type ResolvedTarget, resolveTarget } from "./paths.ts";

export interface PlannedFile {
  readonly target: ResolvedTarget;
  readonly content: Uint8Array;
  readonly mode: number;
  readonly uid?: number;
  readonly gid?: number;
}

/** The most directories one run may create, all its files together. */
export const MAX_NEW_DIRECTORIES = 4096;

/** Set-user-id, set-group-id, sticky. */
const SPECIAL_BITS = 0o7000;
const WORLD_WRITABLE = 0o002;

export interface PlanOptions {
  /** Allow set-id, sticky and world-writable modes (fetch --allow-unsafe-modes). */
  readonly allowUnsafeModes?: boolean;
  /** Files the run writes later (the marker, the sentinel), which a payload file must not block. */
  readonly reserved?: readonly Reserved[];
}

/** A path the run writes after the payload, named for messages ("the marker"). */
export interface Reserved {
  readonly what: string;
  readonly target: WriteTarget;
}

/**
 * Refuses a payload file that is, or is on the way to, a file written later in the run, and
 * one that stands where a later file needs a directory: either would fail after --exec ran.
 */
export function checkReserved(planned: readonly PlannedFile[], reserved: readonly Reserved[]): void {
  for (const file of planned) {
    for (const r of reserved) {
      const path = file.target.hostPath;
      if (
        path === r.target.hostPath ||
        r.target.missingDirs.includes(path) ||
        file.target.missingDirs.includes(r.target.hostPath)
      ) {
        throw new BootsealError(
          "BAD_INPUT",
          `refusing to write ${displayPath(file.target.requested)}: it would take the place of ${r.what} or its directory`,
        );
      }
    }
  }
}

function bad(spec: FileSpec, message: string): BootsealError {
  return new BootsealError(
    "BAD_INPUT",
    `manifest document ${spec.document} (${displayPath(spec.path)}): ${message}`,
  );
}

function unsafeMode(mode: number): string | null {
  const what: string[] = [];
  if (mode & 0o4000) what.push("setuid");
  if (mode & 0o2000) what.push("setgid");
  if (mode & 0o1000) what.push("sticky");
  if (mode & WORLD_WRITABLE) what.push("world-writable");
  return what.length > 0 ? what.join(", ") : null;
}

/** Resolves and checks every entry of a manifest; throws before anything is written. */
export async function planFiles(
  specs: readonly FileSpec[],
  policy: PathPolicy,
  accounts: Accounts,
  options: PlanOptions = {},
): Promise<PlannedFile[]> {
  const planned: PlannedFile[] = [];
  const byHostPath = new Map<string, FileSpec>();
  for (const spec of specs) {
    if (!options.allowUnsafeModes && (spec.mode & (SPECIAL_BITS | WORLD_WRITABLE)) !== 0) {
      throw bad(
        spec,
        `mode ${spec.mode.toString(8).padStart(4, "0")} is ${unsafeMode(spec.mode)}; ` +
          "refused unless fetch runs with --allow-unsafe-modes",
      );
    }
    const target = await resolveTarget(spec.path, policy);
    // Two spellings of one file (through a link) would make the result depend on order.
    const earlier = byHostPath.get(target.hostPath);
    if (earlier !== undefined) throw bad(spec, `names the same file as document ${earlier.document}`);
    byHostPath.set(target.hostPath, spec);
    planned.push({
      target,
      content: spec.content,
      mode: spec.mode,
      ...resolveOwnership(spec.owner, spec.group, accounts, spec.path),
    });
  }
  // A file of one entry on the way to another's: one of the two writes would fail midway.
  const newDirs = new Set<string>();
  for (const [i, file] of planned.entries()) {
    for (const dir of file.target.missingDirs) {
      newDirs.add(dir);
      if (newDirs.size > MAX_NEW_DIRECTORIES) {
        throw bad(
          specs[i] as FileSpec,
          `the manifest would create more than ${MAX_NEW_DIRECTORIES} directories`,
        );
      }
      const other = byHostPath.get(dir);
      if (other !== undefined) {
        throw bad(specs[i] as FileSpec, `needs document ${other.document}'s file as a directory`);
      }
    }
  }
  checkReserved(planned, options.reserved ?? []);
  return planned;
}

/** The write one file goes through; a seam for tests (a failing Nth write). */
export type FileWriter = (
  target: WriteTarget,
  data: Uint8Array,
  options: { mode: number; uid?: number; gid?: number; labeler: FileLabeler | null },
) => Promise<void>;

/** The default writer: the target's missing directories are created by applyPlan first. */
export const atomicWriter: FileWriter = (target, data, options) =>
  writeFileAtomic(target.hostPath, data, { ...options, expectDir: target.hostDir });

/** What replacing one file changed, to undo it. */
type Undo =
  | { readonly kind: "created"; readonly path: string }
  | { readonly kind: "linked"; readonly path: string; readonly keep: string }
  | {
      readonly kind: "copied";
      readonly path: string;
      readonly bytes: Uint8Array;
      readonly mode: number;
      readonly uid: number;
      readonly gid: number;
    };

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

function keepName(path: string): string {
  return join(
    dirname(path),
    `.${basename(path).slice(0, 200)}.bootseal-keep-${randomBytes(6).toString("hex")}.tmp`,
  );
}

/** Keeps the file about to be replaced, if there is one. */
async function keep(path: string, linker: Linker): Promise<Undo> {
  const kept = keepName(path);
  try {
    await linker(path, kept); // link(2) does not follow a link at `path`
    return { kind: "linked", path, keep: kept };
  } catch (err) {
    if (errno(err) === "ENOENT") return { kind: "created", path };
    // EPERM (protected_hardlinks, no hard links on this file system), EACCES (an SELinux
    // policy without the link permission), EMLINK, ...: keep a copy instead.
  }
  // No hard links here: a copy in memory, read without following a link.
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    // O_NONBLOCK: a FIFO swapped in since the plan must not hang the run.
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const info = await handle.stat();
    if (!info.isFile())
      throw new BootsealError("PATH_NOT_ALLOWED", `refusing to replace ${path}: not a regular file`);
    if (info.size > MAX_DOCUMENT_BYTES) {
      throw new BootsealError(
        "TOO_LARGE",
        `cannot keep the old ${path} to restore on failure: larger than ${describeBytes(MAX_DOCUMENT_BYTES)}`,
      );
    }
    const bytes = new Uint8Array(await handle.readFile());
    return { kind: "copied", path, bytes, mode: info.mode & 0o7777, uid: info.uid, gid: info.gid };
  } catch (err) {
    if (errno(err) === "ENOENT") return { kind: "created", path };
    if (err instanceof BootsealError) throw err;
    throw new BootsealError("IO_ERROR", `cannot keep the old ${path} (${errno(err) ?? "error"})`, {
      cause: err,
    });
  } finally {
    await handle?.close();
  }
}

async function undo(step: Undo): Promise<void> {
  if (step.kind === "created") {
    await unlink(step.path).catch((err) => {
      if (errno(err) !== "ENOENT") throw err;
    });
  } else if (step.kind === "linked") {
    const [kept, now] = await Promise.all([lstat(step.keep), lstat(step.path).catch(() => null)]);
    // rename(2) between two links of one file does nothing: the file was never replaced.
    if (now !== null && now.ino === kept.ino && now.dev === kept.dev) await unlink(step.keep);
    else await rename(step.keep, step.path);
  } else {
    await writeFileAtomic(step.path, step.bytes, { mode: step.mode, uid: step.uid, gid: step.gid });
    step.bytes.fill(0);
  }
  await syncDirectory(dirname(step.path)).catch(() => {});
}

/** link(2); a seam for tests of file systems without hard links. */
export type Linker = (existing: string, newPath: string) => Promise<void>;

export interface ApplyOptions {
  readonly labeler: FileLabeler | null;
  readonly write?: FileWriter;
  readonly link?: Linker;
  /** Told about anything the rollback could not undo (paths and errno codes only). */
  readonly log?: (line: string) => void;
}

/** applyPlan, with the planned contents (secrets) wiped by `wipe` when it fails. */
export async function applyPlanOrWipe(
  planned: readonly PlannedFile[],
  options: ApplyOptions,
  wipe: () => void,
): Promise<void> {
  try {
    await applyPlan(planned, options);
  } catch (err) {
    wipe();
    throw err;
  }
}

/** Writes every planned file, or (on the first failure) undoes what this call did and throws. */
export async function applyPlan(planned: readonly PlannedFile[], options: ApplyOptions): Promise<void> {
  const write = options.write ?? atomicWriter;
  const steps: Undo[] = [];
  const createdDirs: string[] = [];
  try {
    for (const file of planned) {
      for (const dir of file.target.missingDirs) {
        const existed = await lstat(dir).then(
          () => true,
          () => false,
        );
        // Recorded first: a mkdir that worked followed by a failed fsync still made it.
        if (!existed) createdDirs.push(dir);
        await makeDirectories([dir]);
      }
      steps.push(await keep(file.target.hostPath, options.link ?? link));
      await write(file.target, file.content, {
        mode: file.mode,
        labeler: options.labeler,
        ...(file.uid !== undefined ? { uid: file.uid } : {}),
        ...(file.gid !== undefined ? { gid: file.gid } : {}),
      });
    }
  } catch (err) {
    await rollback(steps, createdDirs, options.log);
    throw err;
  }
  for (const step of steps) {
    if (step.kind === "linked") {
      await unlink(step.keep).catch((err) =>
        options.log?.(`could not remove the kept old version of ${step.path} (${errno(err) ?? "error"})`),
      );
      await syncDirectory(dirname(step.path)).catch(() => {});
    } else if (step.kind === "copied") {
      step.bytes.fill(0);
    }
  }
}

async function rollback(steps: Undo[], createdDirs: string[], log?: (line: string) => void): Promise<void> {
  for (const step of steps.reverse()) {
    try {
      await undo(step);
    } catch (err) {
      log?.(`rollback: could not restore ${step.path} (${errno(err) ?? "error"})`);
    }
  }
  for (const dir of createdDirs.reverse()) {
    try {
      await rmdir(dir);
      await syncDirectory(dirname(dir)).catch(() => {});
    } catch (err) {
      if (errno(err) === "ENOENT") continue;
      log?.(`rollback: could not remove the directory ${dir} (${errno(err) ?? "error"})`);
    }
  }
}
