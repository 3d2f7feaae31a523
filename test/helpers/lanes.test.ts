/**
 * Keeps peer-tests.txt honest: a test that reaches a peer but is not listed would run in the
 * unit lane (and fail there, loudly: peers.ts refuses in that lane); a listed file that needs
 * no peer would be missing from the unit lane.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { allTestFiles, listedPeerFiles, needsPeers, REPO } from "./lanes.ts";

test("peer-tests.txt lists exactly the test files that import test/helpers/peers.ts", () => {
  const listed = listedPeerFiles();
  const needing = allTestFiles().filter((f) => needsPeers(f));
  const unlisted = needing.filter((f) => !listed.includes(f));
  const extra = listed.filter((f) => !needing.includes(f));
  assert.deepEqual(unlisted, [], "these use peers but are not in test/helpers/peer-tests.txt: add them");
  assert.deepEqual(extra, [], "these are in test/helpers/peer-tests.txt but need no peer: remove them");
});

test("every listed file exists and is listed once", () => {
  const listed = listedPeerFiles();
  assert.equal(new Set(listed).size, listed.length);
  for (const f of listed) assert.ok(existsSync(join(REPO, f)), `${f} does not exist`);
});

test("the import scan sees through helper modules", () => {
  // test/interop/harness.ts imports peers.ts; the interop suites reach it only through it.
  assert.ok(needsPeers("test/interop/harness.ts"));
  assert.ok(needsPeers("test/interop/sops-keys.test.ts"));
  assert.ok(!needsPeers("test/errors.test.ts"));
  assert.ok(!needsPeers("test/helpers/child.ts"));
});
