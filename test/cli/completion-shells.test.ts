/**
 * `bootseal completion zsh|fish`: the scripts load in the real shells (peers: the Debian zsh
 * and fish packages) and complete from the command and flag tables.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, test } from "node:test";
import { main } from "../../src/cli/main.ts";
import { peer } from "../helpers/peers.ts";

const dir = mkdtempSync(join(tmpdir(), "bootseal-completion-shells-"));
after(() => rmSync(dir, { recursive: true, force: true }));

async function script(shell: string): Promise<string> {
  const stdout = new PassThrough();
  let text = "";
  stdout.on("data", (c: Buffer) => {
    text += c.toString();
  });
  const code = await main(["completion", shell], {
    stdout,
    stderr: new PassThrough(),
    stdin: new PassThrough(),
    env: {},
    cwd: dir,
  });
  assert.equal(code, 0);
  return text;
}

test("zsh: the script loads after compinit and registers _bootseal", async () => {
  const file = join(dir, "bootseal.zsh");
  writeFileSync(file, await script("zsh"));
  const out = execFileSync(peer("ZSH_BIN"), [
    "-c",
    `autoload -U compinit && compinit -u && source '${file}' && print -r -- $_comps[bootseal]`,
  ]);
  assert.equal(out.toString().trim(), "_bootseal");
});

test("fish: the script loads and completes commands and flags", async () => {
  const file = join(dir, "bootseal.fish");
  writeFileSync(file, await script("fish"));
  const fish = (line: string) =>
    execFileSync(peer("FISH_BIN"), ["-c", `source '${file}'; complete -C '${line}'`], {
      env: { ...process.env, HOME: dir, XDG_CONFIG_HOME: dir, XDG_DATA_HOME: dir },
    }).toString();
  assert.match(fish("bootseal filest"), /^filestatus/m);
  assert.match(fish("bootseal unset --id"), /^--idempotent/m);
});
