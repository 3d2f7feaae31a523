/**
 * The temporary file of exec-file (sops ExecWithFile): a private directory (0700, under the
 * temp dir, named `.sops…` as sops names it) holding either a fifo (default) that gets the
 * plaintext once a reader opens it, or a regular 0600 file (`--no-fifo`). The directory
 * and what it holds are removed when the command is done.
 */
import { execFileSync } from "node:child_process";
import { randomInt } from "node:crypto";
import { constants, openSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { Socket } from "node:net";
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

/** How often to look for the command's reader on the fifo. */
const FIFO_POLL_MS = 20;

/**
 * Hands `plaintext` to the first reader of the fifo, as sops's writer goroutine does. A
 * blocking open would park a thread-pool thread until a reader comes, for ever if none does
 * (or the command removes the fifo), so the write end is opened non-blocking, which fails
 * (ENXIO) until a reader has the fifo open; then a pipe socket writes, with back-pressure,
 * and closes (the reader's end of file). `stop()` abandons whatever is left.
 */
function feedFifo(path: string, plaintext: Uint8Array): { stop(): Promise<void> } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let socket: Socket | undefined;
  let finish: () => void = () => {};
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const attempt = () => {
    if (stopped) return finish();
    let fd: number;
    try {
      fd = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENXIO") timer = setTimeout(attempt, FIFO_POLL_MS);
      else finish(); // removed by the command: nobody to hand it to
      return;
    }
    socket = new Socket({ fd, readable: false, writable: true });
    socket.on("error", () => finish()); // the reader closed early (EPIPE)
    socket.on("close", () => finish());
    socket.end(plaintext);
  };
  attempt();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      if (socket) socket.destroy();
      else finish();
      return finished;
    },
  };
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
    const feeder = feedFifo(path, plaintext);
    return {
      path,
      async done() {
        await feeder.stop();
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
