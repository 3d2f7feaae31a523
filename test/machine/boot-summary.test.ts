/** src/machine/boot-summary.ts: what a list shows of a machine's current boot, from its status record. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type BootRecord, bootSummary, REASON_MAX_BYTES } from "../../src/machine/boot-summary.ts";
import type { Phase } from "../../src/machine/status-protocol.ts";

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();

function rec(
  version: number,
  entries: [Phase, number, number, { message?: string; exitCode?: number }?][],
): BootRecord {
  const history = entries.map(([phase, s, v, extra]) => ({ phase, at: at(s), version: v, ...extra }));
  const last = history[history.length - 1]!;
  return { phase: last.phase, version, updatedAt: last.at, history };
}

test("reached: the first time each phase was reached in the current version only; since: the run the history ends with", () => {
  const r = rec(2, [
    ["published", 0, 1],
    ["fetching", 1, 1],
    ["failed", 2, 1, { message: "old boot" }],
    ["published", 10, 2],
    ["fetching", 11, 2],
    ["running", 12, 2],
    ["fetching", 13, 2],
    ["fetching", 14, 2],
  ]);
  assert.deepEqual(bootSummary(r), {
    since: at(13),
    reached: { published: at(10), fetching: at(11), running: at(12) },
  });
});

test("failed: the latest failure's first line and exit code; no message gives an empty reason", () => {
  const r = rec(1, [
    ["published", 0, 1],
    ["failed", 5, 1, { message: "first try", exitCode: 2 }],
    ["failed", 6, 1, { message: "  kubeadm join: connection refused\r\n[preflight] more\n", exitCode: 1 }],
  ]);
  assert.deepEqual(bootSummary(r).failure, { reason: "kubeadm join: connection refused", exitCode: 1 });
  assert.equal(bootSummary(r).since, at(5));
  const bare = rec(1, [
    ["published", 0, 1],
    ["failed", 5, 1],
  ]);
  assert.deepEqual(bootSummary(bare).failure, { reason: "" });
});

test("a long reason is cut to REASON_MAX_BYTES of UTF-8 on a character boundary; only failed machines carry one", () => {
  const long = "é".repeat(200);
  const s = bootSummary(
    rec(1, [
      ["published", 0, 1],
      ["failed", 1, 1, { message: long }],
    ]),
  );
  assert.equal(s.failure?.reason, "é".repeat(REASON_MAX_BYTES / 2));
  const ok = bootSummary(
    rec(1, [
      ["published", 0, 1],
      ["failed", 1, 1, { message: "x" }],
      ["succeeded", 2, 1, { message: "fine", exitCode: 0 }],
    ]),
  );
  assert.equal(ok.failure, undefined);
});

test("an empty history: since is the record's updatedAt, nothing reached", () => {
  assert.deepEqual(bootSummary({ phase: "published", version: 1, updatedAt: at(3), history: [] }), {
    since: at(3),
    reached: {},
  });
});
