import assert from "node:assert/strict";
import { test } from "node:test";
import { formatDuration, parseDuration, parseFlagDuration, tryParseDuration } from "../src/duration.ts";

test("Go-style units, alone or in a row, plus d; fractions", () => {
  const cases: [string, number][] = [
    ["500ms", 500],
    ["90s", 90_000],
    ["5m", 300_000],
    ["1h30m", 5_400_000],
    ["2h45m10s", 9_910_000],
    ["7d", 7 * 86_400_000],
    ["1.5h", 5_400_000],
    ["1m500ms", 60_500],
    [" 30s ", 30_000],
  ];
  for (const [text, ms] of cases) assert.equal(parseDuration(text, "x"), ms, text);
});

test("a bare number is seconds, as text or as a YAML number", () => {
  assert.equal(parseDuration("30", "x"), 30_000);
  assert.equal(parseDuration("2.5", "x"), 2500);
  assert.equal(parseDuration(30, "x"), 30_000);
  assert.equal(parseDuration("0", "x"), 0);
});

test("anything else is a USAGE error naming what was set", () => {
  for (const bad of ["", "soon", "1h 30m", "-5s", "5 s", "1y", "s", "1.s", "ms5", true, null, -1]) {
    assert.equal(tryParseDuration(bad), undefined, String(bad));
    assert.throws(
      () => parseDuration(bad, "bootstrapToken.ttl"),
      (err: Error & { code?: string }) => {
        assert.equal(err.code, "USAGE");
        assert.match(err.message, /^bootstrapToken\.ttl: must be a duration such as/);
        return true;
      },
    );
  }
  assert.throws(() => parseFlagDuration("soon", "deadline"), { message: /^--deadline: must be a duration/ });
});

test("a lower bound is the caller's, named in the message", () => {
  assert.throws(() => parseDuration("500ms", "t", { min: 1000 }), {
    code: "USAGE",
    message: "t: must be at least 1s",
  });
  assert.equal(parseDuration("1s", "t", { min: 1000 }), 1000);
});

test("formatDuration reads back", () => {
  for (const ms of [0, 1, 999, 1000, 5_400_000, 86_400_000 + 61_001]) {
    assert.equal(parseDuration(formatDuration(ms), "x"), ms);
  }
  assert.equal(formatDuration(5_400_000), "1h30m");
});
