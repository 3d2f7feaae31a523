/**
 * Reading the input document (a file or stdin) and writing the result (stdout, --output or
 * -i), on src/files: files we write get mode 0600 unless they existed (then their mode is
 * kept, as sops does for -i) and are replaced atomically (replaceFile). Failures get sops's
 * classes (cmd/sops/main.go): a file that does not exist NO_FILE, one that cannot be read
 * READ_FAILED, an output that cannot be written WRITE_FAILED, and -i with --output or with
 * standard input CONFLICTING_FLAGS, checked before anything is read or written.
 */
import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import { BootsealError, hasCode, isBootsealError } from "../errors.ts";
import { replaceFile } from "../files/atomic-write.ts";
import { readFileBounded, readStreamBounded } from "../files/read-bounded.ts";
import type { CliIo } from "./command.ts";

/** No operand, or "-": standard input. */
export function isStdin(file: string | undefined): boolean {
  return file === undefined || file === "-";
}

/**
 * sops's "cannot operate on non-existent file" (exit 100), which encrypt and decrypt check
 * before they load any configuration; other commands find out when they read (READ_FAILED).
 */
/** True when something is at `file` (for commands that act differently on a new file). */
export async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

export async function requireExisting(file: string | undefined, io: CliIo): Promise<void> {
  if (isStdin(file)) return;
  const path = resolve(io.cwd, file as string);
  try {
    await stat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      throw new BootsealError("NO_FILE", `cannot operate on non-existent file "${path}"`);
    }
  }
}

/** The input document: FILE, or standard input for none or "-" (both capped at MAX_DOCUMENT_BYTES). */
export async function readInput(file: string | undefined, io: CliIo): Promise<Uint8Array> {
  if (isStdin(file)) return readStreamBounded(io.stdin, "standard input");
  try {
    return await readFileBounded(file as string);
  } catch (err) {
    // Too large stays its own class; anything else (missing, a directory, EACCES) is sops's
    // "Error reading file".
    if (hasCode(err, "TOO_LARGE")) throw err;
    const message = isBootsealError(err) ? err.message : `cannot read ${file}`;
    throw new BootsealError("READ_FAILED", `Error reading file: ${message}`, { cause: err });
  }
}

export interface OutputTarget {
  readonly inPlace?: boolean;
  readonly output?: string;
  readonly inputFile?: string;
}

/** sops's order: -i with standard input, then -i with --output; both exit 8 before any work. */
export function checkTarget(target: OutputTarget): void {
  if (target.inPlace && isStdin(target.inputFile)) {
    throw new BootsealError("CONFLICTING_FLAGS", "cannot use --in-place when reading from stdin");
  }
  if (target.inPlace && target.output) {
    throw new BootsealError("CONFLICTING_FLAGS", "cannot operate on both --output and --in-place");
  }
}

export async function writeOutput(data: Uint8Array, target: OutputTarget, io: CliIo): Promise<void> {
  checkTarget(target);
  const path = target.inPlace ? target.inputFile : target.output;
  if (path) {
    try {
      await replaceFile(path, data);
    } catch (err) {
      if (isBootsealError(err) && err.code !== "IO_ERROR") throw err;
      const what = target.inPlace ? "in-place file" : "output file";
      const detail = isBootsealError(err) ? err.message : String(err);
      throw new BootsealError("WRITE_FAILED", `Could not open ${what} for writing: ${detail}`, {
        cause: err,
      });
    }
    return;
  }
  await new Promise<void>((resolve, reject) =>
    io.stdout.write(data, (err) =>
      err ? reject(new BootsealError("IO_ERROR", "cannot write to standard output")) : resolve(),
    ),
  );
}
