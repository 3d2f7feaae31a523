import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, test } from "node:test";
import type { CliIo, Command } from "../../src/cli/command.ts";
import { COMMANDS } from "../../src/cli/command-registry.ts";
import { isLegacyForm, takeVerbose, translateLegacy } from "../../src/cli/legacy-args.ts";
import { VERBOSE_ENV } from "../../src/cli/verbose.ts";
import { isBootsealError } from "../../src/errors.ts";

const dir = mkdtempSync(join(tmpdir(), "bootseal-legacy-"));
after(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, "secrets"), "x");

const NAMES = COMMANDS.map((c) => c.name);
let warnings = "";
const stderr = new PassThrough();
stderr.on("data", (c: Buffer) => {
  warnings += c.toString();
});
const io: CliIo = { stdout: new PassThrough(), stderr, stdin: new PassThrough(), env: {}, cwd: dir };

async function load(name: string): Promise<Command> {
  const entry = COMMANDS.find((c) => c.name === name);
  if (!entry) throw new Error(name);
  return entry.load();
}

async function translate(argv: string[]) {
  return (await translateLegacy(argv, load, io)).invocation;
}

test("isLegacyForm: flags first or a file, never a command name or a bare unknown word", () => {
  assert.equal(isLegacyForm(["-d", "f.yaml"], NAMES, dir), true);
  assert.equal(isLegacyForm(["f.yaml"], NAMES, dir), true);
  assert.equal(isLegacyForm(["secrets"], NAMES, dir), true, "an existing file without a dot");
  assert.equal(isLegacyForm(["decrypt", "f.yaml"], NAMES, dir), false);
  assert.equal(isLegacyForm(["frobnicate"], NAMES, dir), false);
  assert.equal(isLegacyForm(["--help"], NAMES, dir), false);
});

test("the mode flags pick the command; the rest go to it when it takes them", async () => {
  assert.deepEqual(await translate(["-d", "--output", "o.yaml", "f.yaml"]), {
    command: "decrypt",
    args: ["--output", "o.yaml", "--", "f.yaml"],
  });
  assert.deepEqual(await translate(["--encrypt", "-a", "age1x", "-i", "f.yaml"]), {
    command: "encrypt",
    args: ["--age", "age1x", "--in-place", "--", "f.yaml"],
  });
  assert.deepEqual(await translate(["-r", "--add-age=age1y", "f.yaml"]), {
    command: "rotate",
    args: ["--add-age", "age1y", "--", "f.yaml"],
  });
  // --extract is decrypt mode only: sops ignores it elsewhere.
  assert.deepEqual(await translate(["-e", "--extract", `["a"]`, "f.yaml"]), {
    command: "encrypt",
    args: ["--", "f.yaml"],
  });
  assert.deepEqual(await translate(["-s", "f.yaml"]), {
    command: "edit",
    args: ["--show-master-keys", "--", "f.yaml"],
  });
  assert.deepEqual(await translate(["--set", `["a"]["b"] {"c": 1}`, "f.yaml"]), {
    command: "set",
    args: ["--", "f.yaml", `["a"]["b"]`, `{"c": 1}`],
  });
});

test("words after FILE are ignored with a warning, as sops does", async () => {
  warnings = "";
  assert.deepEqual(await translate(["-d", "f.yaml", "--output", "x"]), {
    command: "decrypt",
    args: ["--", "f.yaml"],
  });
  assert.match(warnings, /more than one positional argument/);
});

test("refusals: two modes, an unknown flag, no file, a --set without a value", async () => {
  const cases: [string[], RegExp][] = [
    [["-d", "-e", "f.yaml"], /only one of/],
    [["--no-such", "f.yaml"], /not defined: --no-such/],
    [["-d"], /no file specified/],
    [["--set", `["a"]`, "f.yaml"], /Invalid --set format/],
  ];
  for (const [argv, message] of cases) {
    await assert.rejects(
      translate(argv),
      (err) => isBootsealError(err) && message.test(err.message),
      argv.join(" "),
    );
  }
});

test("--verbose before the command or among the legacy flags turns verbose on", async () => {
  const taken = takeVerbose(["--verbose", "decrypt", "f"], io);
  assert.deepEqual(taken.argv, ["decrypt", "f"]);
  assert.equal(taken.io.env[VERBOSE_ENV], "1");
  const legacy = await translateLegacy(["-d", "--verbose", "f.yaml"], load, io);
  assert.equal(legacy.io.env[VERBOSE_ENV], "1");
  assert.equal(io.env[VERBOSE_ENV], undefined, "the caller's io is not changed");
});
