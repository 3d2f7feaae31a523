/** Smoke test of the age CLI: a round trip, and a wrong identity refused. */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { peer } from "../helpers/peers.ts";
import { run, runOk, tempDir } from "./cli.ts";

test("age: encrypt to a recipient, decrypt with its identity", (t) => {
  const age = peer("AGE_BIN");
  const keygen = peer("AGE_KEYGEN_BIN");
  const { dir, remove } = tempDir("age");
  t.after(remove);

  assert.match(runOk(age, ["--version"]), /^v?1\.1\.1/);
  const keyFile = join(dir, "key.txt");
  const otherKey = join(dir, "other.txt");
  runOk(keygen, ["-o", keyFile]);
  runOk(keygen, ["-o", otherKey]);
  const recipient = runOk(keygen, ["-y", keyFile]).trim();
  assert.match(recipient, /^age1[0-9a-z]{58}$/);

  const plaintext = Buffer.from([...Array(256).keys()]);
  writeFileSync(join(dir, "plain.bin"), plaintext);
  runOk(age, ["-r", recipient, "-o", join(dir, "enc.age"), join(dir, "plain.bin")]);
  const encrypted = readFileSync(join(dir, "enc.age"));
  assert.equal(encrypted.subarray(0, 21).toString(), "age-encryption.org/v1");

  runOk(age, ["-d", "-i", keyFile, "-o", join(dir, "out.bin"), join(dir, "enc.age")]);
  assert.deepEqual(readFileSync(join(dir, "out.bin")), plaintext);

  const wrong = run(age, ["-d", "-i", otherKey, join(dir, "enc.age")]);
  assert.notEqual(wrong.status, 0);
  assert.match(wrong.stderr, /no identity matched any of the recipients/);
});
