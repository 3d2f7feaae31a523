/**
 * Reading the input document (a file or stdin) and writing the result (stdout, --output or
 * -i). Files we write get mode 0600 unless they existed (then their mode is kept, as sops
 * does for -i) and are replaced atomically: temp file in the same directory, fsync, rename.
 */
import { readFile, stat } from "node:fs/promises";
import { BootsealError } from "../errors.ts";
import { writeFileAtomic as writeAtomic } from "../fetcher/atomic-write.ts";
import type { CliIo } from "./command.ts";

/** 64 MiB: far above any bootstrap payload, small enough not to exhaust memory. */
const MAX_INPUT_BYTES = 64 * 1024 * 1024;

export async function readInput(file: string | undefined, io: CliIo): Promise<Uint8Array> {
  if (file === undefined || file === "-") {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of io.stdin) {
      const buf = typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer);
      size += buf.length;
      if (size > MAX_INPUT_BYTES)
        throw new BootsealError("TOO_LARGE", "standard input is larger than 64 MiB");
      chunks.push(buf);
    }
    return new Uint8Array(Buffer.concat(chunks));
  }
  try {
    const info = await stat(file);
    if (!info.isFile()) throw new BootsealError("BAD_INPUT", `${file} is not a regular file`);
    if (info.size > MAX_INPUT_BYTES) throw new BootsealError("TOO_LARGE", `${file} is larger than 64 MiB`);
    return new Uint8Array(await readFile(file));
  } catch (cause) {
    if (cause instanceof BootsealError) throw cause;
    const code = (cause as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new BootsealError("BAD_INPUT", `${file}: no such file`);
    throw new BootsealError("IO_ERROR", `cannot read ${file} (${code ?? "error"})`, { cause });
  }
}

/** Replaces `path` atomically, keeping an existing file's mode (as sops -i does); new files get 0600. */
export async function writeFileAtomic(path: string, data: Uint8Array): Promise<void> {
  const mode = await stat(path).then(
    (info) => info.mode & 0o777,
    () => 0o600, // a new file: it may hold plaintext
  );
  await writeAtomic(path, data, { mode });
}

export interface OutputTarget {
  readonly inPlace?: boolean;
  readonly output?: string;
  readonly inputFile?: string;
}

export async function writeOutput(data: Uint8Array, target: OutputTarget, io: CliIo): Promise<void> {
  if (target.inPlace) {
    if (!target.inputFile || target.inputFile === "-") {
      throw new BootsealError("USAGE", "-i needs a file, not standard input");
    }
    await writeFileAtomic(target.inputFile, data);
  } else if (target.output) {
    await writeFileAtomic(target.output, data);
  } else {
    await new Promise<void>((resolve, reject) =>
      io.stdout.write(data, (err) =>
        err ? reject(new BootsealError("IO_ERROR", "cannot write to standard output")) : resolve(),
      ),
    );
  }
}
