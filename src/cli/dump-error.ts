/**
 * sops's words before a failure to write the tree in the output format (exit 4,
 * ErrorDumpingTree): decrypt says "Error dumping file", decrypt --extract "Error dumping
 * tree", encrypt "Could not marshal tree". The codecs say what could not be written.
 */
import { BootsealError, hasCode } from "../errors.ts";

export type DumpStep = "Error dumping file" | "Error dumping tree" | "Could not marshal tree";

/** `emit()`, with an UNREPRESENTABLE failure's message prefixed by the step sops names. */
export function dumping<T>(step: DumpStep, emit: () => T): T {
  try {
    return emit();
  } catch (err) {
    if (!hasCode(err, "UNREPRESENTABLE")) throw err;
    throw new BootsealError("UNREPRESENTABLE", `${step}: ${err.message}`, { cause: err });
  }
}
