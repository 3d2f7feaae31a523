/**
 * The npm bin entry (dist/cli/main.js, from src/cli/bin.ts): under a Node older than 22 one
 * line and the usage exit code instead of a SyntaxError stack; under this Node, the CLI.
 * The old Node is the machine's own (/usr/bin/node, Node 20 here) or BOOTSEAL_TEST_OLD_NODE.
 */
import assert from "node:assert/strict";
import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { before, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { EXIT_INTERNAL, EXIT_USAGE, MIN_NODE_MAJOR, nodeVersionProblem } from "../../src/cli/node-version.ts";
import { REPO } from "../fetcher/helpers.ts";
import { DIST_BIN, ensureDist } from "../helpers/built-dist.ts";
import { oldNode } from "../helpers/old-node.ts";

const BIN = DIST_BIN;

before(ensureDist);

test("the version floor matches package.json's engines, the exit codes exit-codes.ts", () => {
  const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as {
    engines: { node: string };
    bin: { bootseal: string };
  };
  assert.equal(pkg.engines.node, `>=${MIN_NODE_MAJOR}`);
  assert.equal(pkg.bin.bootseal, "dist/cli/main.js");
  assert.equal(EXIT_USAGE, EXIT_CODES.USAGE);
  assert.equal(EXIT_INTERNAL, EXIT_CODES.INTERNAL);
  assert.equal(nodeVersionProblem("20.20.2"), "bootseal needs Node.js >= 22 (this is 20.20.2)");
  assert.equal(nodeVersionProblem("22.0.0"), null);
  assert.equal(nodeVersionProblem("24.21.0"), null);
});

test("an old Node: one line, the usage exit code, no stack", (t) => {
  const old = oldNode();
  if (!old) {
    t.skip("no Node older than 22 on this machine (set BOOTSEAL_TEST_OLD_NODE)");
    return;
  }
  for (const args of [["--version"], ["decrypt", "x.yaml"], ["serve"]]) {
    const res: SpawnSyncReturns<string> = spawnSync(old.path, [BIN, ...args], {
      encoding: "utf8",
      cwd: REPO,
    });
    assert.equal(res.status, EXIT_CODES.USAGE, res.stderr);
    assert.equal(res.stdout, "");
    assert.equal(res.stderr, `bootseal needs Node.js >= 22 (this is ${old.version})\n`);
  }
});

test("this Node: the bin entry runs the CLI (version, help, an error's exit code)", () => {
  const version = spawnSync(process.execPath, [BIN, "--version"], { encoding: "utf8" });
  assert.equal(version.status, 0, version.stderr);
  assert.match(version.stdout, /^bootseal \d+\.\d+\.\d+/);
  const help = spawnSync(process.execPath, [BIN, "status", "--help"], { encoding: "utf8" });
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /--deadline DUR/);
  const usage = spawnSync(process.execPath, [BIN, "status"], {
    encoding: "utf8",
    env: { PATH: process.env.PATH },
  });
  assert.equal(usage.status, EXIT_CODES.USAGE);
  assert.match(usage.stderr, /^bootseal: status needs --server URL/);
});

test("the bin runs as npm links it (the file itself, through its #! line): this Node's CLI, and the old Node's one line", (t) => {
  assert.ok(readFileSync(BIN, "utf8").startsWith("#!/usr/bin/env node\n"), "a shebang first");
  const withNodeFirst = (dir: string) => ({ PATH: `${dir}:${process.env.PATH}` });
  const own = spawnSync(BIN, ["--version"], {
    encoding: "utf8",
    env: withNodeFirst(dirname(process.execPath)),
  });
  assert.equal(own.status, 0, own.stderr);
  assert.match(own.stdout, /^bootseal \d+\.\d+\.\d+/);
  const old = oldNode();
  if (!old) {
    t.skip("no Node older than 22 on this machine (set BOOTSEAL_TEST_OLD_NODE)");
    return;
  }
  const res = spawnSync(BIN, ["--version"], { encoding: "utf8", env: withNodeFirst(dirname(old.path)) });
  assert.equal(res.status, EXIT_CODES.USAGE, res.stderr);
  assert.equal(res.stderr, `bootseal needs Node.js >= 22 (this is ${old.version})\n`);
});
