import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { parseListen } from "../../src/cli/commands/serve.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
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

test("--help lists serve and exits 0", async () => {
  const t = io();
  assert.equal(await main(["--help"], t.io), 0);
  assert.match(t.out(), /serve/);
});

test("every error code has a distinct exit code", () => {
  const numbers = ERROR_CODES.map((c) => EXIT_CODES[c]);
  assert.equal(new Set(numbers).size, numbers.length);
  assert.ok(!numbers.includes(0) && !numbers.includes(1), "0 is success and 1 is what a crash exits with");
});

test("--listen parsing", () => {
  assert.deepEqual(parseListen("127.0.0.1:7480"), { host: "127.0.0.1", port: 7480 });
  assert.deepEqual(parseListen("[::1]:80"), { host: "::1", port: 80 });
  assert.throws(() => parseListen("7480"), /HOST:PORT/);
  assert.throws(() => parseListen("h:99999"), /HOST:PORT/);
});
