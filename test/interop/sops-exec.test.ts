/**
 * exec-env and exec-file side by side with the real sops 3.13: the same arguments on the
 * same document give the same environment, the same file contents, and the same exit status
 * (the command's own, 255 for a signal). Failures both refuse; bootseal's exit codes are
 * checked through EXIT_CODES.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { createHarness, type Harness, ok, type RunResult } from "./harness.ts";

const PLAIN = [
  "TOKEN: abcdef.0123456789abcdef",
  "PORT: 6443",
  "DEBUG: true",
  "RATIO: 1.5",
  "BIG: 1e20",
  "NOTHING: null",
  "EMPTY: ''",
  "# a comment",
  'MULTI: "line1\\nline2"',
  "",
].join("\n");
const KEYS = "TOKEN|PORT|DEBUG|RATIO|BIG|NOTHING|EMPTY|MULTI";

let h: Harness;
let enc: string;
before(async () => {
  h = createHarness();
  writeFileSync(join(h.dir, "plain.yaml"), PLAIN);
  writeFileSync(join(h.dir, "nested.yaml"), "outer:\n    inner: x\n");
  for (const name of ["plain", "nested"]) {
    const out = ok(await h.sops(["encrypt", "--age", h.ageRecipient, `${name}.yaml`]), "sops encrypt");
    writeFileSync(join(h.dir, `${name}.enc.yaml`), out);
  }
  enc = "plain.enc.yaml";
});
after(() => h?.cleanup());

/** Both tools with the same arguments; stderr is not compared (each words its own lines). */
async function both(args: string[]): Promise<{ sops: RunResult; bootseal: RunResult }> {
  const [sops, bootseal] = await Promise.all([h.sops(args), h.bootseal(args)]);
  return { sops: sops as RunResult, bootseal: bootseal as RunResult };
}

function same(r: { sops: RunResult; bootseal: RunResult }, status: number): string {
  assert.equal(r.sops.status, status, `sops: ${r.sops.stderr}`);
  assert.equal(r.bootseal.status, status, `bootseal: ${r.bootseal.stderr}`);
  assert.equal(r.bootseal.stdout.toString(), r.sops.stdout.toString());
  return r.bootseal.stdout.toString();
}

describe("exec-env against sops", () => {
  test("the top-level values are in the environment, as sops writes them; the exit status passes through", async () => {
    const out = same(await both(["exec-env", enc, `env | grep -E '^(${KEYS})=' | sort; exit 3`]), 3);
    assert.match(out, /^BIG=1E\+20$/m);
    assert.match(out, /^NOTHING=<nil>$/m);
    assert.match(out, /^TOKEN=abcdef\.0123456789abcdef$/m);
  });

  test("--pristine: only the values (and what sh adds)", async () => {
    const out = same(await both(["exec-env", "--pristine", enc, "env | sort"]), 0);
    assert.doesNotMatch(out, /^GNUPGHOME=/m);
    assert.match(out, /^PORT=6443$/m);
  });

  test("a command killed by a signal: 255 from both", async () => {
    same(await both(["exec-env", enc, "kill -9 $$"]), 255);
  });

  test("--same-process replaces the process: same output, the shell's exit status", async () => {
    same(await both(["exec-env", "--same-process", enc, "echo $TOKEN; exit 7"]), 7);
  });

  test("flags stop at FILE: a COMMAND argument that looks like a flag is the command's", async () => {
    same(await both(["exec-env", enc, "echo --pristine"]), 0);
  });

  test("refusals: a nested value, a missing COMMAND, --same-process with --background", async () => {
    const nested = await both(["exec-env", "nested.enc.yaml", "true"]);
    assert.notEqual(nested.sops.status, 0);
    assert.equal(nested.bootseal.status, EXIT_CODES.BAD_INPUT);
    assert.match(nested.bootseal.stderr, /complex value in environment; offending key outer/);
    const missing = await both(["exec-env", enc]);
    assert.notEqual(missing.sops.status, 0);
    assert.equal(missing.bootseal.status, EXIT_CODES.USAGE);
    const conflict = await both(["exec-env", "--same-process", "--background", enc, "true"]);
    assert.equal(conflict.sops.status, 8);
    assert.equal(conflict.bootseal.status, EXIT_CODES.USAGE);
    for (const r of [nested, missing, conflict])
      assert.ok(!r.bootseal.stderr.includes("    at "), "no stack trace");
  });

  test("--background: both return at once with 0, and the command still runs", async () => {
    const marks = ["sops", "bootseal"].map((tool) => join(h.dir, `bg-${tool}`));
    const [sops, bootseal] = await Promise.all([
      h.sops(["exec-env", "--background", enc, `echo "$PORT" > ${marks[0]}`]),
      h.bootseal(["exec-env", "--background", enc, `echo "$PORT" > ${marks[1]}`]),
    ]);
    assert.deepEqual([sops?.status, bootseal?.status], [0, 0]);
    for (const mark of marks) {
      // Bounded wait for the detached command's file (no fixed sleep).
      for (let i = 0; i < 1200 && !(existsSync(mark) && readFileSync(mark, "utf8").endsWith("\n")); i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(readFileSync(mark, "utf8"), "6443\n");
    }
  });
});

describe("exec-file against sops", () => {
  test("default: a fifo holding the document in its own format", async () => {
    const out = same(await both(["exec-file", enc, "test -p {} && cat {}"]), 0);
    assert.match(out, /^TOKEN: abcdef/m);
  });

  test("--no-fifo --output-type json: a 0600 regular file", async () => {
    const out = same(
      await both([
        "exec-file",
        "--no-fifo",
        "--output-type",
        "json",
        enc,
        "test -f {} && stat -c %a {} && cat {}",
      ]),
      0,
    );
    assert.match(out, /^600\n\{\n\t"TOKEN"/);
  });

  test("--filename names the file; every {} is replaced; the exit status passes through", async () => {
    same(
      await both([
        "exec-file",
        "--no-fifo",
        "--filename",
        "app.env",
        "--output-type",
        "dotenv",
        enc,
        "basename {}; cat {}; wc -c < {}; exit 4",
      ]),
      4,
    );
    same(
      await both([
        "exec-file",
        "--filename",
        "app.env",
        "--output-type",
        "dotenv",
        enc,
        "basename {}; cat {}",
      ]),
      0,
    );
  });

  test("the file and its directory are gone afterwards; a fifo nobody reads does not hang", async () => {
    for (const flags of [[], ["--no-fifo"]]) {
      const r = await both(["exec-file", ...flags, enc, "echo {}; exit 5"]);
      assert.deepEqual([r.sops.status, r.bootseal.status], [5, 5]);
      for (const path of [r.sops.stdout, r.bootseal.stdout].map((b) => b.toString().trim())) {
        assert.match(path, /\/\.sops[^/]*\/tmp-file/);
        assert.equal(existsSync(path), false, `${path} removed`);
        assert.equal(existsSync(join(path, "..")), false, "its directory removed");
      }
    }
  });

  test("a --filename outside the directory is refused by both", async () => {
    for (const name of ["../escape", "/etc/escape"]) {
      const r = await both(["exec-file", "--filename", name, enc, "cat {}"]);
      assert.notEqual(r.sops.status, 0);
      assert.equal(r.bootseal.status, EXIT_CODES.BAD_INPUT);
      assert.match(r.bootseal.stderr, /not a local path/);
    }
  });
});

describe("--user against sops", () => {
  const root = process.getuid?.() === 0;
  test(`--user nobody: the command and the file belong to nobody${root ? "" : " (not root: both refuse)"}`, async () => {
    const envRun = await both([
      "exec-env",
      "--user",
      "nobody",
      enc,
      'id -u; echo "$HOME $USER $LOGNAME $PORT"',
    ]);
    const fileRun = await both([
      "exec-file",
      "--no-fifo",
      "--user",
      "nobody",
      enc,
      "stat -c '%u %a' {}; head -1 {}",
    ]);
    const fifoRun = await both(["exec-file", "--user", "nobody", enc, "head -1 {}"]);
    if (!root) {
      for (const r of [envRun, fileRun, fifoRun]) {
        assert.notEqual(r.sops.status, 0);
        assert.equal(r.bootseal.status, EXIT_CODES.EXEC_FAILED);
      }
      return;
    }
    assert.match(same(envRun, 0), /^65534\n\S+ nobody nobody 6443\n$/);
    assert.match(same(fileRun, 0), /^65534 600\nTOKEN: /);
    same(fifoRun, 0);
    const unknown = await both(["exec-env", "--user", "no-such-user-here", enc, "true"]);
    assert.notEqual(unknown.sops.status, 0);
    assert.equal(unknown.bootseal.status, EXIT_CODES.BAD_INPUT);
  });
});
