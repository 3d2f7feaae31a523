/**
 * exec-env FILE COMMAND (sops exec-env): run COMMAND (`/bin/sh -c`) with the document's
 * top-level keys added to its environment, values as sops's flat files write them.
 */
import { scalarText } from "../../envelope/sops/codecs/flat-text.ts";
import type { Branch } from "../../envelope/sops/document.ts";
import { BootsealError } from "../../errors.ts";
import type { Command } from "../command.ts";
import { childEnv, execShell, lookupUser, runShell, switchUser } from "../exec-child.ts";
import { decryptForExec, EXEC_FLAGS, fileAndCommand, splitOperands } from "../exec-source.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { DECRYPTION_ORDER_FLAG } from "../key-flags.ts";

const spec = {
  name: "exec-env",
  summary: "execute a command with decrypted values inserted into the environment",
  operands: "FILE COMMAND",
  flags: [
    EXEC_FLAGS[0],
    {
      name: "pristine",
      type: "boolean",
      help: "insert only the decrypted values into the environment without forwarding existing environment variables",
    },
    EXEC_FLAGS[1],
    {
      name: "same-process",
      type: "boolean",
      help: "run command in the current process instead of in a child process",
    },
    DECRYPTION_ORDER_FLAG,
  ],
  notes: [
    "COMMAND runs with /bin/sh -c; flags go before FILE. The exit status is COMMAND's.",
    "Values: strings as they are, other scalars as sops writes them in a dotenv file; comments are skipped.",
  ],
} as const satisfies CommandSpec;

/** sops exec-env's checks: top-level scalars only, no '=' in a key. */
function envValues(branch: Branch | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of branch?.items ?? []) {
    if (item.kind === "comment") continue;
    if (item.value.kind !== "scalar") {
      throw new BootsealError(
        "BAD_INPUT",
        `cannot use complex value in environment; offending key ${item.key}`,
      );
    }
    if (item.key.includes("=")) {
      throw new BootsealError("BAD_INPUT", `cannot use keys with '=' in environment: ${item.key}`);
    }
    const text = scalarText(item.value);
    out[item.key] = typeof text === "string" ? text : Buffer.from(text).toString();
  }
  return out;
}

export const execEnvCommand: Command = {
  spec,
  async run(args, io) {
    const split = splitOperands(spec, args);
    const { values } = parseFlags(spec, split.flags, io.env);
    const { file, command } = fileAndCommand(split.operands);
    if (values.background) {
      io.stderr.write("bootseal: WARNING: exec-env's --background option is deprecated\n");
      if (values["same-process"]) {
        throw new BootsealError("USAGE", "the --same-process flag cannot be used with --background");
      }
    }
    const { branches } = await decryptForExec(file, {}, values["decryption-order"], io);
    const extra = envValues(branches[0]);
    const user = values.user ? lookupUser(values.user) : null;
    if (user) switchUser(user);
    const env = childEnv(io, values.pristine === true, user, extra);
    if (values["same-process"]) execShell(command, env);
    return runShell(command, env, io, { background: values.background === true });
  },
};
