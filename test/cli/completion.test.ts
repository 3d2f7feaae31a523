/**
 * The completion scripts load in the real shells and complete from the command and flag
 * tables: bash here (always installed); zsh and fish, peers, in completion-shells.test.ts.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { main } from "../../src/cli/main.ts";

const dir = mkdtempSync(join(tmpdir(), "bootseal-completion-"));
after(() => rmSync(dir, { recursive: true, force: true }));

async function script(shell: string): Promise<{ code: number; text: string; err: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let text = "";
  let err = "";
  stdout.on("data", (c: Buffer) => {
    text += c.toString();
  });
  stderr.on("data", (c: Buffer) => {
    err += c.toString();
  });
  const code = await main(["completion", shell], {
    stdout,
    stderr,
    stdin: new PassThrough(),
    env: {},
    cwd: dir,
  });
  return { code, text, err };
}

/** COMPREPLY after completing `words` (the last one is the word under the cursor). */
function bashComplete(file: string, words: string[]): string[] {
  const quoted = words.map((w) => `'${w}'`).join(" ");
  const out = execFileSync("bash", [
    "-c",
    `source '${file}'; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _bootseal; printf '%s\\n' "\${COMPREPLY[@]}"`,
  ]);
  return out.toString().split("\n").filter(Boolean);
}

test("bash: the script loads, registers _bootseal and completes commands, flags and actions", async () => {
  const { code, text } = await script("bash");
  assert.equal(code, 0);
  const file = join(dir, "bootseal.bash");
  writeFileSync(file, text);
  const registered = execFileSync("bash", ["-c", `source '${file}' && complete -p bootseal`]).toString();
  assert.match(registered, /-F _bootseal bootseal/);
  assert.deepEqual(bashComplete(file, ["bootseal", "fil"]), ["filestatus"]);
  assert.deepEqual(bashComplete(file, ["bootseal", "unset", "--id"]), ["--idempotent"]);
  assert.deepEqual(bashComplete(file, ["bootseal", "set", "--value-"]).sort(), [
    "--value-file",
    "--value-stdin",
  ]);
  assert.deepEqual(bashComplete(file, ["bootseal", "groups", ""]), ["add", "delete"]);
  assert.deepEqual(bashComplete(file, ["bootseal", "completion", "z"]), ["zsh"]);
  // sops's legacy top-level flags.
  assert.deepEqual(bashComplete(file, ["bootseal", "--dec"]), ["--decrypt"]);
  // A flag of another command is not offered.
  assert.deepEqual(bashComplete(file, ["bootseal", "filestatus", "--value"]), []);
});

test("completion of an unknown shell is a usage error", async () => {
  const { code, err } = await script("tcsh");
  assert.equal(code, EXIT_CODES.USAGE);
  assert.match(err, /bash, zsh, fish/);
});
