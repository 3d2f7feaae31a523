/**
 * The writes of an Ignition config that are not regular files (write-plan.ts's applyPlan does
 * those): directories created or given a mode and owner, symbolic links (mask links to
 * /dev/null among them), and existing nodes set aside to be replaced or removed. Each step is
 * journaled so that a failure anywhere in the run undoes it: created directories and links are
 * removed, changed modes and owners restored, nodes set aside renamed back. `commit` drops what
 * was set aside.
 */
import { randomBytes } from "node:crypto";
import { chmod, lchown, lstat, mkdir, rename, rmdir, symlink, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { BootsealError } from "../../errors.ts";
import { syncDirectory } from "../../files/atomic-write.ts";

type Step =
  | { readonly kind: "mkdir"; readonly path: string }
  | {
      readonly kind: "attrs";
      readonly path: string;
      readonly mode: number;
      readonly uid: number;
      readonly gid: number;
    }
  | { readonly kind: "aside"; readonly path: string; readonly kept: string; readonly dir: boolean }
  | { readonly kind: "link"; readonly path: string };

function errno(err: unknown): string {
  return (err as NodeJS.ErrnoException | null)?.code ?? "error";
}

function io(path: string, what: string, err: unknown): BootsealError {
  if (err instanceof BootsealError) return err;
  return new BootsealError("IO_ERROR", `cannot ${what} ${path} (${errno(err)})`, { cause: err });
}

function keptName(path: string): string {
  return join(
    dirname(path),
    `.${basename(path).slice(0, 200)}.bootseal-keep-${randomBytes(6).toString("hex")}.tmp`,
  );
}

export class Journal {
  readonly #steps: Step[] = [];
  readonly #log: (line: string) => void;

  constructor(log: (line: string) => void) {
    this.#log = log;
  }

  /** Creates the missing directories (outermost first) with mode 0755. */
  async mkdirs(paths: readonly string[]): Promise<void> {
    for (const path of paths) {
      try {
        await mkdir(path, { mode: 0o755 });
      } catch (err) {
        if (errno(err) !== "EEXIST") throw io(path, "create the directory", err);
        if (!(await lstat(path)).isDirectory()) {
          throw new BootsealError("PATH_NOT_ALLOWED", `refusing to write under ${path}: not a directory`);
        }
        continue;
      }
      this.#steps.push({ kind: "mkdir", path });
      await syncDirectory(dirname(path)).catch(() => {});
    }
  }

  /** Sets mode (when given) and owner of an existing directory, keeping the old ones. */
  async setAttrs(path: string, mode: number | undefined, uid: number, gid: number): Promise<void> {
    const before = await lstat(path).catch((err) => {
      throw io(path, "inspect", err);
    });
    if (!before.isDirectory())
      throw new BootsealError("PATH_NOT_ALLOWED", `refusing to change ${path}: not a directory`);
    const oldMode = before.mode & 0o7777;
    if ((mode === undefined || mode === oldMode) && uid === before.uid && gid === before.gid) return;
    this.#steps.push({ kind: "attrs", path, mode: oldMode, uid: before.uid, gid: before.gid });
    try {
      await lchown(path, uid, gid);
      await chmod(path, mode ?? oldMode);
    } catch (err) {
      throw io(path, "set the mode and owner of", err);
    }
  }

  /** Renames an existing node out of the way (undo renames it back; commit removes it). */
  async setAside(path: string): Promise<void> {
    const info = await lstat(path);
    const kept = keptName(path);
    try {
      await rename(path, kept);
    } catch (err) {
      throw io(path, "move aside", err);
    }
    this.#steps.push({ kind: "aside", path, kept, dir: info.isDirectory() });
  }

  /** Creates a symbolic link at `path` (nothing may be there), owned by uid:gid. */
  async symlink(path: string, target: string, uid: number, gid: number): Promise<void> {
    try {
      await symlink(target, path);
    } catch (err) {
      throw io(path, "create the link", err);
    }
    this.#steps.push({ kind: "link", path });
    try {
      await lchown(path, uid, gid);
    } catch (err) {
      throw io(path, "set the owner of", err);
    }
    await syncDirectory(dirname(path)).catch(() => {});
  }

  /** Undoes every step, newest first; what cannot be undone is logged (paths and errno only). */
  async rollback(): Promise<void> {
    for (const step of this.#steps.reverse()) {
      try {
        if (step.kind === "mkdir") await rmdir(step.path);
        else if (step.kind === "link") await unlink(step.path);
        else if (step.kind === "aside") await rename(step.kept, step.path);
        else {
          await lchown(step.path, step.uid, step.gid);
          await chmod(step.path, step.mode);
        }
      } catch (err) {
        if (errno(err) !== "ENOENT") this.#log(`rollback: could not restore ${step.path} (${errno(err)})`);
      }
    }
    this.#steps.length = 0;
  }

  /** Drops what was set aside (only empty directories are ever set aside). */
  async commit(): Promise<void> {
    for (const step of this.#steps) {
      if (step.kind !== "aside") continue;
      await (step.dir ? rmdir(step.kept) : unlink(step.kept)).catch((err) =>
        this.#log(`could not remove the old version of ${step.path} (${errno(err)})`),
      );
    }
    this.#steps.length = 0;
  }
}
