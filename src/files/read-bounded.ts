/**
 * Reading a whole file or stream into memory under a size cap, for every input bootseal
 * takes from the local machine (the CLI's document or stdin, an artifact to sign or verify).
 * The file's size is checked before it is read and the stream's while it is read, so an
 * oversized input fails with TOO_LARGE instead of exhausting memory; a missing file is the
 * caller's mistake (BAD_INPUT), any other failure IO_ERROR with the errno code (never the
 * contents).
 */
import { readFile, stat } from "node:fs/promises";
import { BootsealError } from "../errors.ts";
import { describeBytes, MAX_DOCUMENT_BYTES } from "../limits.ts";

export interface ReadBoundedOptions {
  /** The cap in bytes; MAX_DOCUMENT_BYTES unless the caller reads something bigger. */
  readonly maxBytes?: number;
}

/** A regular file's bytes, at most `maxBytes`. */
export async function readFileBounded(path: string, options: ReadBoundedOptions = {}): Promise<Uint8Array> {
  const maxBytes = options.maxBytes ?? MAX_DOCUMENT_BYTES;
  try {
    const info = await stat(path);
    if (!info.isFile()) throw new BootsealError("BAD_INPUT", `${path} is not a regular file`);
    if (info.size > maxBytes)
      throw new BootsealError("TOO_LARGE", `${path} is larger than ${describeBytes(maxBytes)}`);
    return new Uint8Array(await readFile(path));
  } catch (cause) {
    if (cause instanceof BootsealError) throw cause;
    const code = (cause as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new BootsealError("BAD_INPUT", `${path}: no such file`);
    throw new BootsealError("IO_ERROR", `cannot read ${path} (${code ?? "error"})`, { cause });
  }
}

/** Everything a stream yields, at most `maxBytes`; `what` names it in the error. */
export async function readStreamBounded(
  stream: AsyncIterable<unknown>,
  what: string,
  options: ReadBoundedOptions = {},
): Promise<Uint8Array> {
  const maxBytes = options.maxBytes ?? MAX_DOCUMENT_BYTES;
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const buf = typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Uint8Array);
    size += buf.length;
    if (size > maxBytes)
      throw new BootsealError("TOO_LARGE", `${what} is larger than ${describeBytes(maxBytes)}`);
    chunks.push(buf);
  }
  return new Uint8Array(Buffer.concat(chunks));
}
