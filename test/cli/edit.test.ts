/**
 * edit's own behaviour, in process, with scripted editors (shell scripts, real programs):
 * how the editor command line is split, the bounded retry on content that does not parse,
 * a missing or failing editor, and that the temporary directory is always removed. The
 * side-by-side comparison with sops is test/interop/sops-subcommands.test.ts.
 */
import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, test } from "node:test";
import { generateIdentity, identityToRecipient } from "age-encryption";
import { isOlderVersion } from "../../src/cli/commands/edit.ts";
import { MAX_EDIT_ROUNDS, splitCommandLine } from "../../src/cli/edit-session.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { main } from "../../src/cli/main.ts";
import { isBootsealError } from "../../src/errors.ts";

const dir = mkdtempSync(join(tmpdir(), "bootseal-edit-test-"));
let identity = "";
let recipient = "";
after(() => rmSync(dir, { recursive: true, force: true }));

function script(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

async function run(args: string[], env: Record<string, string>) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const stdin = new PassThrough();
  stdin.end();
  let err = "";
  stderr.on("data", (c: Buffer) => {
    err += c.toString();
  });
  stdout.resume();
  const code = await main(args, {
    stdout,
    stderr,
    stdin,
    env: { PATH: process.env.PATH, SOPS_AGE_KEY: identity, ...env },
    cwd: dir,
  });
  return { code, err };
}

before(async () => {
  identity = await generateIdentity();
  recipient = await identityToRecipient(identity);
});

async function encrypted(name: string): Promise<string> {
  const path = join(dir, name);
  writeFileSync(path, "a: 1\n");
  const { code, err } = await run(["encrypt", "--age", recipient, "-i", path], {});
  assert.equal(code, 0, err);
  return path;
}

test("splitCommandLine splits like google/shlex (sops's editor parsing)", () => {
  assert.deepEqual(splitCommandLine("code --wait"), ["code", "--wait"]);
  assert.deepEqual(splitCommandLine(`'/opt/my editor/bin' -f "a b" c\\ d`), [
    "/opt/my editor/bin",
    "-f",
    "a b",
    "c d",
  ]);
  assert.deepEqual(splitCommandLine(`vim # a comment`), ["vim"]);
  assert.deepEqual(splitCommandLine(`a"b"'c'`), ["abc"]);
  for (const bad of [`"open`, `'open`, "trailing\\"]) {
    assert.throws(
      () => splitCommandLine(bad),
      (e) => isBootsealError(e) && e.code === "USAGE",
      bad,
    );
  }
});

test("isOlderVersion: sops's version.AIsNewerThanB against this build's version", () => {
  assert.equal(isOlderVersion("3.0.0"), true);
  assert.equal(isOlderVersion("1.14"), true);
  assert.equal(isOlderVersion("3.13.2"), false);
  assert.equal(isOlderVersion("3.13.2-rc1"), true);
  assert.equal(isOlderVersion("9.0.0"), false);
});

test("content that never parses: back to the editor, bounded, nothing written, no temporary files left", {
  timeout: 120_000,
}, async () => {
  const file = await encrypted("loop.yaml");
  const before = readFileSync(file);
  const editor = script("always-bad.sh", `echo "$1" >> "${join(dir, "paths")}"\nprintf 'a: [\\n' > "$1"`);
  const { code, err } = await run(["edit", file], { EDITOR: editor });
  assert.equal(code, EXIT_CODES.BAD_INPUT, err);
  assert.match(err, /giving up after 20 edits/);
  const paths = readFileSync(join(dir, "paths"), "utf8").trim().split("\n");
  assert.equal(paths.length, MAX_EDIT_ROUNDS);
  assert.equal(new Set(paths).size, 1, "the same temporary file every round");
  assert.ok(!existsSync(paths[0] as string), "the temporary file is gone");
  assert.deepEqual(readFileSync(file), before);
});

test("an editor that fails or cannot be found: NO_EDITOR, nothing written", {
  timeout: 120_000,
}, async () => {
  const file = await encrypted("fail.yaml");
  const before = readFileSync(file);
  const failing = script("fails.sh", `printf 'b: 2\\n' > "$1"\nexit 3`);
  const cases: Record<string, string>[] = [
    { SOPS_EDITOR: failing },
    { SOPS_EDITOR: join(dir, "no-such-editor") },
    { EDITOR: `"unterminated` },
    // No SOPS_EDITOR, no EDITOR and none of vim, nano, vi on the PATH.
    { PATH: join(dir, "empty-path") },
  ];
  for (const env of cases) {
    const { code, err } = await run(["edit", file], env);
    assert.equal(code, EXIT_CODES.NO_EDITOR, `${JSON.stringify(env)}: ${err}`);
    assert.match(err, /Could not run editor/);
    assert.equal(err.trim().split("\n").length, 1, "one line");
  }
  assert.deepEqual(readFileSync(file), before);
});

test("a top-level sops key in the edited content is refused and the user sent back", {
  timeout: 120_000,
}, async () => {
  const file = await encrypted("sopskey.yaml");
  const editor = script(
    "sops-key-then-fix.sh",
    `n=$(cat "${join(dir, "n")}" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "${join(dir, "n")}"\nif [ $n -eq 1 ]; then printf 'sops: x\\n' > "$1"; else printf 'b: 2\\n' > "$1"; fi`,
  );
  const { code, err } = await run(["edit", file], { EDITOR: editor });
  assert.equal(code, 0, err);
  assert.match(err, /Tree not valid for encryption/);
  const out = new PassThrough();
  let text = "";
  out.on("data", (c: Buffer) => {
    text += c.toString();
  });
  const stdin = new PassThrough();
  stdin.end();
  await main(["decrypt", file], {
    stdout: out,
    stderr: new PassThrough(),
    stdin,
    env: { SOPS_AGE_KEY: identity },
    cwd: dir,
  });
  assert.equal(text, "b: 2\n");
});
