import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { parseListen } from "../../src/cli/commands/serve.ts";
import { EXIT_CODES, SOPS_EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { main } from "../../src/cli/main.ts";
import { ERROR_CODES } from "../../src/errors.ts";

function io() {
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
    io: { stdout, stderr, stdin: new PassThrough(), env: {}, cwd: process.cwd() },
    out: () => out,
    err: () => err,
  };
}

test("unknown command: one line on stderr, usage exit code", async () => {
  const t = io();
  const code = await main(["frobnicate"], t.io);
  assert.equal(code, EXIT_CODES.USAGE);
  assert.equal(t.err().trim().split("\n").length, 1);
  assert.match(t.err(), /unknown command "frobnicate"/);
});

test("an unknown flag is a usage error, not a stack trace", async () => {
  const t = io();
  const code = await main(["serve", "--no-such-flag"], t.io);
  assert.equal(code, EXIT_CODES.USAGE);
  assert.ok(!t.err().includes("    at "), "no stack trace");
});

test("a bare bootseal is sops's bare form: no file specified (100), the help on stderr only", async () => {
  const t = io();
  assert.equal(await main([], t.io), EXIT_CODES.NO_FILE);
  assert.equal(t.out(), "");
  assert.match(t.err(), /usage: bootseal <command>/);
});

test("--help lists serve and exits 0", async () => {
  const t = io();
  assert.equal(await main(["--help"], t.io), 0);
  assert.match(t.out(), /serve/);
});

test("error codes share an exit code only where sops lumps the failures together", () => {
  const byExit = new Map<number, string[]>();
  for (const c of ERROR_CODES) byExit.set(EXIT_CODES[c], [...(byExit.get(EXIT_CODES[c]) ?? []), c]);
  assert.ok(!byExit.has(0), "0 is success");
  for (const [exit, codes] of byExit) {
    if (codes.length > 1)
      assert.ok(SOPS_EXIT_CODES[exit], `${codes.join(", ")} share ${exit}, which sops does not use`);
  }
  // The sops-shared failures the CLI maps (cmd/sops/codes/codes.go).
  assert.equal(EXIT_CODES.USAGE, 1);
  assert.equal(EXIT_CODES.NOT_ENCRYPTED, 1);
  assert.equal(EXIT_CODES.CONFLICTING_FLAGS, 8);
  assert.equal(EXIT_CODES.DECRYPTION_FAILED, 25);
  assert.equal(EXIT_CODES.MAC_MISMATCH, 51);
  assert.equal(EXIT_CODES.EMPTY_DOCUMENT, 92);
  assert.equal(EXIT_CODES.NO_FILE, 100);
  assert.equal(EXIT_CODES.NO_KEY_AVAILABLE, 128);
  assert.equal(EXIT_CODES.ALREADY_ENCRYPTED, 203);
  // bootseal's own failures stay off sops's numbers.
  for (const c of [
    "NOT_FOUND",
    "STORE_UNAVAILABLE",
    "SERVICE_UNAVAILABLE",
    "PRECONDITION_FAILED",
    "TOKEN_EXPIRED",
    "IO_ERROR",
    "INTERNAL",
  ] as const) {
    assert.equal(SOPS_EXIT_CODES[EXIT_CODES[c]], undefined, c);
  }
});

test("--listen parsing", () => {
  assert.deepEqual(parseListen("127.0.0.1:7480"), { host: "127.0.0.1", port: 7480 });
  assert.deepEqual(parseListen("[::1]:80"), { host: "::1", port: 80 });
  assert.throws(() => parseListen("7480"), /HOST:PORT/);
  assert.throws(() => parseListen("h:99999"), /HOST:PORT/);
});
