/**
 * exec-file FILE COMMAND (sops exec-file): run COMMAND (`/bin/sh -c`) with `{}` replaced by
 * the path of a temporary fifo (or, with --no-fifo, a 0600 file) holding the decrypted
 * document; removed when COMMAND ends.
 */
import { codecFor } from "../../envelope/sops/codecs/index.ts";
import type { Command } from "../command.ts";
import { childEnv, lookupUser, runShell, switchUser } from "../exec-child.ts";
import { decryptForExec, EXEC_FLAGS, fileAndCommand, splitOperands } from "../exec-source.ts";
import { FALLBACK_FILENAME, placePlaintext } from "../exec-tempfile.ts";
import { FORMAT_FLAGS } from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { DECRYPTION_ORDER_FLAG } from "../key-flags.ts";

const spec = {
  name: "exec-file",
  summary: "execute a command with the decrypted contents as a temporary file",
  operands: "FILE COMMAND",
  flags: [
    EXEC_FLAGS[0],
    {
      name: "no-fifo",
      type: "boolean",
      help: "use a regular file instead of a fifo to temporarily hold the decrypted contents",
    },
    EXEC_FLAGS[1],
    FORMAT_FLAGS[0],
    FORMAT_FLAGS[1],
    {
      name: "filename",
      type: "string",
      value: "NAME",
      help: `filename for the temporary file (default: ${FALLBACK_FILENAME})`,
    },
    DECRYPTION_ORDER_FLAG,
  ],
  notes: [
    "COMMAND runs with /bin/sh -c, every {} in it replaced by the file's path; flags go before FILE.",
    "The exit status is COMMAND's. A fifo can be read once.",
  ],
} as const satisfies CommandSpec;

export const execFileCommand: Command = {
  spec,
  async run(args, io) {
    const split = splitOperands(spec, args);
    const { values } = parseFlags(spec, split.flags, io.env);
    const { file, command } = fileAndCommand(split.operands);
    const types = { "input-type": values["input-type"], "output-type": values["output-type"] };
    const { branches, output } = await decryptForExec(file, types, values["decryption-order"], io);
    const plaintext = codecFor(output).emitPlain(branches);
    if (values.background)
      io.stderr.write("bootseal: WARNING: exec-file's --background option is deprecated\n");
    // As sops: switch first, so the directory and the file belong to the user.
    const user = values.user ? lookupUser(values.user) : null;
    if (user) switchUser(user);
    const background = values.background === true;
    const temp = await placePlaintext(plaintext, {
      fifo: values["no-fifo"] !== true,
      filename: values.filename,
      writeFifo: !background,
    });
    try {
      const env = childEnv(io, false, user, {});
      return await runShell(command.replaceAll("{}", temp.path), env, io, { background });
    } finally {
      await temp.done();
    }
  },
};
