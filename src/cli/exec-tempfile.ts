/**
 * The temporary file of exec-file (sops ExecWithFile): a private directory (0700, under the
 * temp dir, named `.sops…` as sops names it) holding either a fifo (default) that gets the
 * plaintext once a reader opens it, or a regular 0600 file (`--no-fifo`). The directory
 * and what it holds are removed when the command is done.
 */
import { execFileSync } from "node:child_process";
import { randomInt } from "node:crypto";
import { closeSync, constants, openSync } from "node:fs";
import { mkdtemp, open, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { isAbsolute, join, normalize } from "node:path";
import { BootsealError } from "../errors.ts";

/** sops's default name (exec.FallbackFilename); a regular file gets random digits after it. */
export const FALLBACK_FILENAME = "tmp-file";

/** Go's filepath.IsLocal, for Unix: relative, non-empty, and not climbing out with "..". */
export function isLocalPath(name: string): boolean {
  if (name === "" || isAbsolute(name)) return false;
  const clean = normalize(name);
  return clean !== ".." && !clean.startsWith("../");
}

export interface TempPlaintext {
  /** The path the command gets for `{}`. */
  readonly path: string;
  /** After the command ends: make sure the fifo writer is not left waiting, then remove all. */
  done(): Promise<void>;
}

/** A fifo; node has no mkfifo(2), so the coreutils program makes it. */
function mkfifo(path: string): void {
  try {
    execFileSync("mkfifo", ["-m", "600", path], { stdio: "ignore" });
  } catch (cause) {
    throw new BootsealError("IO_ERROR", "cannot create the fifo for exec-file (is mkfifo installed?)", {
      cause,
    });
  }
}

/**
 * Writes `plaintext` where the command will find it. `filename` must be a local path (sops:
 * "The provided filename is not a local path."). `writeFifo`: false for a background command,
 * which sops does not wait for either.
 */
export async function placePlaintext(
  plaintext: Uint8Array,
  options: { fifo: boolean; filename: string | undefined; writeFifo: boolean },
): Promise<TempPlaintext> {
  if (options.filename !== undefined && options.filename !== "" && !isLocalPath(options.filename)) {
    throw new BootsealError("BAD_INPUT", "the provided filename is not a local path");
  }
  const dir = await mkdtemp(join(tmpdir(), ".sops"));
  const remove = () => rm(dir, { recursive: true, force: true });
  try {
    if (!options.fifo) {
      const name = options.filename || `${FALLBACK_FILENAME}${randomInt(1e9)}`;
      const path = join(dir, name);
      await writeFile(path, plaintext, { mode: 0o600, flag: "wx" });
      return { path, done: remove };
    }
    const path = join(dir, options.filename || FALLBACK_FILENAME);
    mkfifo(path);
    if (!options.writeFifo) return { path, done: remove };
    // A reader of our own, held until the command ends: our write end opens at once (no
    // thread waits for a reader that may never come), and the plaintext stays in the pipe
    // until the command opens and reads it. Closing it at the end makes a write still
    // blocked on a full pipe fail (EPIPE) instead of hanging.
    const reader = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    const handle = await open(path, constants.O_WRONLY);
    const writer = handle
      .write(plaintext)
      .catch(() => {
        // The command read less than all of it, or never opened the fifo.
      })
      .finally(() => handle.close());
    return {
      path,
      async done() {
        closeSync(reader);
        await writer;
        await remove();
      },
    };
  } catch (err) {
    await remove();
    if (err instanceof BootsealError) throw err;
    throw new BootsealError(
      "IO_ERROR",
      `cannot write the temporary file: ${(err as NodeJS.ErrnoException).code}`,
    );
  }
}
