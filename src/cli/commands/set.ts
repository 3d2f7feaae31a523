/**
 * set FILE PATH [VALUE] (sops set): put a JSON value at a sops tree path of the first
 * document and write the file back, under the same data key (../reseal.ts). The value comes
 * from the operand, a file (--value-file) or standard input (--value-stdin), so it need not
 * appear in a process listing.
 */
import { BootsealError } from "../../errors.ts";
import { readFileBounded, readStreamBounded } from "../../files/read-bounded.ts";
import type { Command } from "../command.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { TREE_EDIT_FLAGS } from "../key-flags.ts";
import { changeFirstDocument } from "../reseal.ts";
import { type PathStep, parseSetValue, parseTreePath, setPath } from "../tree-path.ts";

const spec = {
  name: "set",
  summary: "set a key or branch of an encrypted document to a JSON value, in place",
  operands: "FILE PATH [VALUE]",
  flags: [
    ...TREE_EDIT_FLAGS,
    {
      name: "value-file",
      type: "boolean",
      help: "VALUE is a file to read the value from (keeps it out of process listings); not with --value-stdin",
    },
    {
      name: "value-stdin",
      type: "boolean",
      help: "read the value from standard input, without a VALUE operand; not with --value-file",
    },
    { name: "idempotent", type: "boolean", help: "do nothing if PATH already has the given value" },
  ],
  notes: [
    `PATH is sops's syntax, e.g. '["somekey"][0]'; VALUE is JSON, e.g. '{"somevalue":true}' or '"text"'.`,
  ],
} as const satisfies CommandSpec;

export const setCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    if (values["value-file"] && values["value-stdin"]) {
      throw new BootsealError("USAGE", "cannot use both --value-file and --value-stdin");
    }
    const wanted = values["value-stdin"] ? 2 : 3;
    if (positionals.length !== wanted) {
      throw new BootsealError(
        "NO_FILE",
        `set needs FILE PATH${wanted === 3 ? " VALUE" : ""} (${wanted} operands)`,
      );
    }
    const [file, pathText, operand] = positionals as [string, string, string | undefined];
    let path: PathStep[];
    try {
      path = parseTreePath(pathText);
    } catch {
      throw new BootsealError("BAD_SET_VALUE", "Invalid set index format");
    }
    const decoder = new TextDecoder();
    const text = values["value-stdin"]
      ? decoder.decode(await readStreamBounded(io.stdin, "standard input"))
      : values["value-file"]
        ? decoder.decode(await readFileBounded(operand as string))
        : (operand as string);
    const value = parseSetValue(text);
    await changeFirstDocument(
      file,
      values,
      io,
      (branch) => setPath(branch, path, value),
      values.idempotent === true,
    );
    return 0;
  },
};
