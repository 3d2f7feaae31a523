/**
 * exec-env and exec-file in-process (no peers: an age identity from typage, the document
 * encrypted by bootseal itself), plus the operand rule, the local-path rule and the user
 * lookup. The side-by-side checks against sops are test/interop/sops-exec.test.ts.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { generateIdentity, identityToRecipient } from "age-encryption";
import { execEnvCommand } from "../../src/cli/commands/exec-env.ts";
import { lookupUser } from "../../src/cli/exec-child.ts";
import { splitOperands } from "../../src/cli/exec-source.ts";
import { isLocalPath } from "../../src/cli/exec-tempfile.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { main } from "../../src/cli/main.ts";
import { BootsealError } from "../../src/errors.ts";

const MAIN = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "bootseal-exec-"));
after(() => rmSync(dir, { recursive: true, force: true }));

let env: Record<string, string>;

function io(extraEnv: Record<string, string> = {}) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (c: Buffer) => {
    out += c.toString();
  });
  stderr.on("data", (c: Buffer) => {
    err += c.toString();
  });
  return {
    io: { stdout, stderr, stdin: new PassThrough(), env: { ...env, ...extraEnv }, cwd: dir },
    out: () => out,
    err: () => err,
  };
}

async function run(args: string[], extraEnv: Record<string, string> = {}) {
  const t = io(extraEnv);
  const code = await main(args, t.io);
  return { code, out: t.out(), err: t.err() };
}

before(async () => {
  const identity = await generateIdentity();
  const recipient = await identityToRecipient(identity);
  env = { PATH: process.env.PATH ?? "/usr/bin:/bin", SOPS_AGE_KEY: identity, HOME: dir };
  writeFileSync(join(dir, "app.yaml"), "NAME: web\nPORT: 8080\n# note\nENABLED: false\n");
  writeFileSync(join(dir, "deep.yaml"), "a:\n    b: c\n");
  for (const name of ["app", "deep"]) {
    const r = await run([
      "encrypt",
      "--age",
      recipient,
      "--output",
      join(dir, `${name}.enc.yaml`),
      join(dir, `${name}.yaml`),
    ]);
    assert.equal(r.code, 0, r.err);
  }
});

describe("exec-env (in-process)", () => {
  test("values in the environment, the rest of it kept, comments skipped, exit status passed", async () => {
    const r = await run(
      ["exec-env", join(dir, "app.enc.yaml"), 'echo "$NAME $PORT $ENABLED $KEEP"; exit 9'],
      { KEEP: "kept" },
    );
    assert.equal(r.code, 9);
    assert.equal(r.out, "web 8080 false kept\n");
    assert.match(r.err, /exit status 9/);
  });

  test("--pristine drops the current environment; a decrypted value wins over it otherwise", async () => {
    const pristine = await run(
      ["exec-env", "--pristine", join(dir, "app.enc.yaml"), 'echo "[$KEEP] $NAME"'],
      { KEEP: "x" },
    );
    assert.deepEqual([pristine.code, pristine.out], [0, "[] web\n"]);
    const over = await run(["exec-env", join(dir, "app.enc.yaml"), 'echo "$NAME"'], { NAME: "old" });
    assert.equal(over.out, "web\n");
  });

  test("a nested value is BAD_INPUT; one operand is USAGE", async () => {
    const nested = await run(["exec-env", join(dir, "deep.enc.yaml"), "true"]);
    assert.equal(nested.code, EXIT_CODES.BAD_INPUT);
    assert.match(nested.err, /offending key a/);
    assert.equal((await run(["exec-env", join(dir, "app.enc.yaml")])).code, EXIT_CODES.USAGE);
  });
});

describe("exec-file (in-process)", () => {
  test("the fifo holds the decrypted document; --no-fifo is a 0600 file; both removed after", async () => {
    const fifo = await run(["exec-file", join(dir, "app.enc.yaml"), "test -p {} && cat {}"]);
    assert.deepEqual([fifo.code, fifo.out], [0, "NAME: web\nPORT: 8080\n# note\nENABLED: false\n"]);
    const file = await run([
      "exec-file",
      "--no-fifo",
      "--output-type",
      "json",
      join(dir, "app.enc.yaml"),
      "stat -c %a {}; cat {}",
    ]);
    assert.equal(file.code, 0, file.err);
    assert.match(file.out, /^600\n\{\n\t"NAME": "web"/);
    const gone = await run(["exec-file", join(dir, "app.enc.yaml"), "echo {}"]);
    assert.equal(gone.code, 0);
    assert.equal(
      (await run(["exec-file", "--no-fifo", join(dir, "app.enc.yaml"), `test -e ${gone.out.trim()}`])).code,
      1,
    );
  });

  test("a command that never opens the fifo, removes it, or opens it late: no hang, its status", async () => {
    assert.equal((await run(["exec-file", join(dir, "app.enc.yaml"), "exit 6"])).code, 6);
    assert.equal((await run(["exec-file", join(dir, "app.enc.yaml"), "rm {}; exit 4"])).code, 4);
    const late = await run(["exec-file", join(dir, "app.enc.yaml"), "sleep 0.3; head -1 {}"]);
    assert.deepEqual([late.code, late.out], [0, "NAME: web\n"]);
  });

  test("SIGTERM for bootseal goes to the command; the file is still removed", async () => {
    const child = spawn(
      process.execPath,
      [MAIN, "exec-file", "--no-fifo", join(dir, "app.enc.yaml"), "echo {}; exec sleep 60 >/dev/null"],
      {
        env,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    let err = "";
    child.stderr.on("data", (c: Buffer) => {
      err += c.toString();
    });
    // Wait for the path on stdout (the command is running), then signal bootseal.
    await new Promise<void>((resolve) =>
      child.stdout.on("data", (c: Buffer) => {
        out += c.toString();
        if (out.endsWith("\n")) resolve();
      }),
    );
    child.kill("SIGTERM");
    const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
    assert.equal(code, 255, `bootseal reports the command's death by signal (${err})`);
    assert.equal(existsSync(out.trim()), false, "the plaintext file is gone");
  });

  test("--filename must be local", async () => {
    const r = await run(["exec-file", "--filename", "../x", join(dir, "app.enc.yaml"), "cat {}"]);
    assert.equal(r.code, EXIT_CODES.BAD_INPUT);
    const ok = await run([
      "exec-file",
      "--filename",
      "sub/../x.env",
      "--output-type",
      "dotenv",
      join(dir, "app.enc.yaml"),
      "basename {}; cat {}",
    ]);
    assert.deepEqual([ok.code, ok.out], [0, "x.env\nNAME=web\nPORT=8080\n# note\nENABLED=false\n"]);
  });
});

describe("exec helpers", () => {
  test("flags stop at the first operand; string flags take their value; -- ends them", () => {
    const spec = execEnvCommand.spec;
    assert.deepEqual(splitOperands(spec, ["--pristine", "--user", "bob", "f.yaml", "ls --all", "x"]), {
      flags: ["--pristine", "--user", "bob"],
      operands: ["f.yaml", "ls --all", "x"],
    });
    assert.deepEqual(splitOperands(spec, ["--user=bob", "--", "--f.yaml", "cmd"]), {
      flags: ["--user=bob"],
      operands: ["--f.yaml", "cmd"],
    });
  });

  test("local paths as Go's filepath.IsLocal sees them", () => {
    for (const p of ["a", "a/b", "a/../b", "./a"]) assert.equal(isLocalPath(p), true, p);
    for (const p of ["", "/a", "..", "../a", "a/../../b"]) assert.equal(isLocalPath(p), false, p);
  });

  test("users from /etc/passwd; an unknown one is BAD_INPUT", () => {
    const root = lookupUser("root");
    assert.deepEqual([root.uid, root.gid], [0, 0]);
    assert.ok(root.groups.includes(0));
    assert.throws(
      () => lookupUser("no-such-user-here"),
      (e: unknown) => e instanceof BootsealError && e.code === "BAD_INPUT",
    );
  });
});
