/**
 * How the file store (file.ts, file-lock.ts, file-sweep.ts) turns file-system errors into
 * store errors: one mapping, so a full disk or a denied directory means the same code wherever
 * the store meets it.
 */
import { BootsealError } from "../../src/errors.ts";

export function errno(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err ? String(err.code) : undefined;
}

/** File-system failures as store errors; the path is not shown (it reveals the layout only). */
export function fsError(err: unknown, action: string): BootsealError {
  if (err instanceof BootsealError) return err;
  const code = errno(err);
  if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
    return new BootsealError("STORE_FORBIDDEN", `file store: permission denied to ${action}`, { cause: err });
  }
  if (code === "ENAMETOOLONG") {
    return new BootsealError("BAD_INPUT", "file store: a key segment is too long for the file system", {
      cause: err,
    });
  }
  if (code === "ENOTDIR" || code === "EISDIR" || code === "EEXIST") {
    // S3 lets `a` and `a/b` both be objects; a file system cannot have `a` as file and directory.
    return new BootsealError(
      "BAD_INPUT",
      "file store: the key collides with a directory or a file on its path",
      {
        cause: err,
      },
    );
  }
  if (code === "ENOSPC" || code === "EDQUOT" || code === "EIO" || code === "EMFILE" || code === "ENFILE") {
    return new BootsealError("STORE_UNAVAILABLE", `file store: cannot ${action} (${code})`, { cause: err });
  }
  return new BootsealError("IO_ERROR", `file store: cannot ${action}`, { cause: err });
}
