/**
 * filestatus FILE (sops filestatus): `{"encrypted":true}` when FILE carries sops metadata
 * with a version and a MAC, `{"encrypted":false}` when it has none; a file that cannot be read
 * or parsed is an error, as in sops (subcommand/filestatus: only "metadata not found" is false).
 */
import { KEY_KINDS } from "../../../providers/keys/index.ts";
import { loadEncrypted } from "../../envelope/document.ts";
import { BootsealError, hasCode } from "../../errors.ts";
import type { Command } from "../command.ts";
import { readInput } from "../file-io.ts";
import { INPUT_TYPE_FLAG } from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { pickFormats } from "../sops-file.ts";

const spec = {
  name: "filestatus",
  summary: 'print {"encrypted":true} or {"encrypted":false}: whether FILE is a sops document',
  operands: "FILE",
  flags: [INPUT_TYPE_FLAG],
} as const satisfies CommandSpec;

export const filestatusCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    const file = positionals[0];
    if (file === undefined) throw new BootsealError("NO_FILE", "no file specified");
    const formats = pickFormats(file, { "input-type": values["input-type"] });
    const bytes = await readInput(file, io);
    let encrypted: boolean;
    try {
      const { metadata } = loadEncrypted(bytes, formats.input, KEY_KINDS);
      encrypted = metadata.version !== "" && metadata.mac !== "";
    } catch (err) {
      if (!hasCode(err, "NOT_ENCRYPTED")) throw err;
      encrypted = false;
    }
    io.stdout.write(`${JSON.stringify({ encrypted })}\n`);
    return 0;
  },
};
