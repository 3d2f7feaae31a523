/**
 * What exec-env and exec-file share before a command runs: sops's operand rule (flags stop
 * at the first operand, then exactly FILE and COMMAND) and the decryption of FILE.
 */
import { KEY_KINDS, resolverFor } from "../../providers/keys/index.ts";
import { loadEncrypted } from "../envelope/document.ts";
import { decryptDocument } from "../envelope/sops/decrypt.ts";
import type { Branch } from "../envelope/sops/document.ts";
import { BootsealError } from "../errors.ts";
import type { CliIo } from "./command.ts";
import { readInput } from "./file-io.ts";
import type { CommandSpec, Flag } from "./flags.ts";
import { parseDecryptionOrder, pickFormats, providerDeps } from "./sops-file.ts";

/** The flags exec-env and exec-file share, in sops's words. */
export const EXEC_FLAGS = [
  {
    name: "background",
    type: "boolean",
    help: "background the process and don't wait for it to complete (DEPRECATED)",
  },
  { name: "user", type: "string", value: "USER", help: "the user to run the command as" },
] as const satisfies readonly Flag[];

/**
 * The arguments before the first operand (flags), and the operands. urfave/cli, which sops
 * uses, stops reading flags there, so a COMMAND such as `ls --all` never reaches the flag
 * parser; `--` ends the flags too.
 */
export function splitOperands(
  spec: CommandSpec,
  args: readonly string[],
): { flags: string[]; operands: string[] } {
  const takesValue = (arg: string): boolean => {
    if (arg.includes("=")) return false;
    const name = arg.replace(/^--?/, "");
    const flag = spec.flags.find((f: Flag) => f.name === name || f.short === name);
    return flag?.type === "string";
  };
  let i = 0;
  while (i < args.length) {
    const arg = args[i] as string;
    if (arg === "--") return { flags: args.slice(0, i), operands: args.slice(i + 1) };
    if (!arg.startsWith("-") || arg === "-") break;
    i += takesValue(arg) ? 2 : 1;
  }
  return { flags: args.slice(0, i), operands: args.slice(i) };
}

/** FILE and COMMAND; anything else is sops's "missing file to decrypt" (a usage error). */
export function fileAndCommand(operands: readonly string[]): { file: string; command: string } {
  const [file, command] = operands;
  if (operands.length !== 2 || file === undefined || command === undefined) {
    throw new BootsealError("USAGE", "missing file to decrypt (usage: FILE COMMAND)");
  }
  return { file, command };
}

/** FILE decrypted (MAC checked), with the output format sops would pick for it. */
export async function decryptForExec(
  file: string,
  types: { "input-type"?: string; "output-type"?: string },
  decryptionOrder: string | undefined,
  io: CliIo,
): Promise<{ branches: Branch[]; output: ReturnType<typeof pickFormats>["output"] }> {
  const order = parseDecryptionOrder(decryptionOrder);
  const formats = pickFormats(file, types);
  const input = await readInput(file, io);
  const doc = loadEncrypted(input, formats.input, KEY_KINDS);
  const branches = await decryptDocument(doc.branches, doc.metadata, {
    resolve: resolverFor(providerDeps(io.env)),
    order,
    ignoreMac: false,
  });
  return { branches, output: formats.output };
}
