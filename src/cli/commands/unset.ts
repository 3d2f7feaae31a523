/**
 * unset FILE PATH (sops unset): remove a key or list item at a sops tree path of the first
 * document and write the file back under the same data key (../reseal.ts). A missing key or
 * index fails unless --idempotent, which then leaves the file untouched.
 */
import { BootsealError, hasCode } from "../../errors.ts";
import type { Command } from "../command.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { TREE_EDIT_FLAGS } from "../key-flags.ts";
import { changeFirstDocument } from "../reseal.ts";
import { type PathStep, parseTreePath, unsetPath } from "../tree-path.ts";

const spec = {
  name: "unset",
  summary: "remove a key or branch from an encrypted document, in place",
  operands: "FILE PATH",
  flags: [
    ...TREE_EDIT_FLAGS,
    { name: "idempotent", type: "boolean", help: "do nothing if PATH does not exist" },
  ],
  notes: [`PATH is sops's syntax, e.g. '["somekey"][0]'.`],
} as const satisfies CommandSpec;

export const unsetCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    if (positionals.length !== 2) throw new BootsealError("NO_FILE", "unset needs FILE PATH (2 operands)");
    const [file, pathText] = positionals as [string, string];
    let path: PathStep[];
    try {
      path = parseTreePath(pathText);
    } catch {
      throw new BootsealError("BAD_SET_VALUE", "Invalid unset index format");
    }
    await changeFirstDocument(
      file,
      values,
      io,
      (branch) => {
        try {
          return { branch: unsetPath(branch, path), changed: true };
        } catch (err) {
          if (!hasCode(err, "NOT_FOUND")) throw err;
          // sops: a missing key is its generic error (exit 1), which --idempotent forgives.
          if (!values.idempotent) throw new BootsealError("BAD_INPUT", err.message);
          return { branch, changed: false };
        }
      },
      true,
    );
    return 0;
  },
};
