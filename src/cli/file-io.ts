/**
 * Reading the input document (a file or stdin) and writing the result (stdout, --output or
 * -i), on src/files: files we write get mode 0600 unless they existed (then their mode is
 * kept, as sops does for -i) and are replaced atomically (replaceFile).
 */
import { BootsealError } from "../errors.ts";
import { replaceFile } from "../files/atomic-write.ts";
import { readFileBounded, readStreamBounded } from "../files/read-bounded.ts";
import type { CliIo } from "./command.ts";

/** The input document: FILE, or standard input for none or "-" (both capped at MAX_DOCUMENT_BYTES). */
export async function readInput(file: string | undefined, io: CliIo): Promise<Uint8Array> {
  if (file === undefined || file === "-") return readStreamBounded(io.stdin, "standard input");
  return readFileBounded(file);
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
    await replaceFile(target.inputFile, data);
  } else if (target.output) {
    await replaceFile(target.output, data);
  } else {
    await new Promise<void>((resolve, reject) =>
      io.stdout.write(data, (err) =>
        err ? reject(new BootsealError("IO_ERROR", "cannot write to standard output")) : resolve(),
      ),
    );
  }
}
