/**
 * The fleet page's pure browser modules under Node (no DOM): natural name order, the table's
 * filters and sorts (table-query.ts), the storm view's numbers (fleet-stats.ts), stuck and
 * boot times (machine-time.ts) and how times are written (time-text.ts), each against values
 * worked out by hand. The page itself in Chromium: fleet-page-storm.test.ts.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Phase } from "../../src/machine/status-protocol.ts";
import {
  bootHistogram,
  failureGroups,
  failureKey,
  percentile,
  phaseSeries,
  stuckCounts,
} from "../../src/service/fleet-page/browser/fleet-stats.ts";
import { bootMs, isStuck } from "../../src/service/fleet-page/browser/machine-time.ts";
import type { Row } from "../../src/service/fleet-page/browser/row.ts";
import { DEFAULT_QUERY, naturalKey, selectRows } from "../../src/service/fleet-page/browser/table-query.ts";
import { agoText, durationText } from "../../src/service/fleet-page/browser/time-text.ts";

const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);
const MIN = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();

/** A row whose boot reached the given phases at NOW minus the given minutes (the last one is its phase). */
function row(name: string, steps: [Phase, number][], extra: Partial<Row> = {}, ns = "prod"): Row {
  const [phase, minutesAgo] = steps[steps.length - 1]!;
  return {
    namespace: ns,
    name,
    phase,
    version: 1,
    updatedAt: iso(NOW - minutesAgo * MIN),
    since: iso(NOW - minutesAgo * MIN),
    reached: Object.fromEntries(steps.map(([p, m]) => [p, iso(NOW - m * MIN)])),
    ...extra,
  };
}

const mapOf = (rows: Row[]) => new Map(rows.map((r) => [`${r.namespace}/${r.name}`, r]));
const names = (rows: Row[]) => rows.map((r) => r.name);

describe("table-query", () => {
  test("natural order: numbers by value, with text around them; a longer run after a shorter", () => {
    const want = [
      "node-a",
      "worker-1",
      "worker-2",
      "worker-9",
      "worker-10",
      "worker-11",
      "worker-100",
      "worker-b",
    ];
    const shuffled = [...want].reverse();
    assert.deepEqual(
      shuffled.sort((a, b) => (naturalKey(a) < naturalKey(b) ? -1 : 1)),
      want,
    );
    assert.ok(naturalKey("w-1-10") > naturalKey("w-1-9"));
    assert.ok(naturalKey("w-01") === naturalKey("w-1"), "leading zeros do not count");
  });

  const rows = [
    row("worker-10", [
      ["published", 30],
      ["succeeded", 28],
    ]),
    row("worker-2", [
      ["published", 30],
      ["fetching", 10],
    ]),
    row(
      "worker-1",
      [
        ["published", 30],
        ["failed", 20],
      ],
      { failure: { reason: "kubeadm join: connection refused", exitCode: 1 } },
    ),
    row("db-3", [["published", 1]], {}, "data"),
    row("worker-11", [
      ["published", 40],
      ["succeeded", 35],
    ]),
  ];

  test("sorted by namespace then natural name, both ways", () => {
    assert.deepEqual(names(selectRows(mapOf(rows), DEFAULT_QUERY, NOW, 5 * MIN)), [
      "db-3",
      "worker-1",
      "worker-2",
      "worker-10",
      "worker-11",
    ]);
    assert.deepEqual(names(selectRows(mapOf(rows), { ...DEFAULT_QUERY, descending: true }, NOW, 5 * MIN)), [
      "worker-11",
      "worker-10",
      "worker-2",
      "worker-1",
      "db-3",
    ]);
  });

  test("sorted by boot duration (finished: to its end; booting: so far), ties by name", () => {
    const q = { ...DEFAULT_QUERY, sort: "boot" as const };
    // worker-10: 2 min, worker-11: 5 min, worker-1: 10 min, worker-2: 30 min so far, db-3: 1 min so far
    assert.deepEqual(names(selectRows(mapOf(rows), q, NOW, 5 * MIN)), [
      "db-3",
      "worker-10",
      "worker-11",
      "worker-1",
      "worker-2",
    ]);
  });

  test("filters: search (any case, on namespace/name), namespace, phase, one failure group, stuck only", () => {
    const pick = (q: Partial<typeof DEFAULT_QUERY>) =>
      names(selectRows(mapOf(rows), { ...DEFAULT_QUERY, ...q }, NOW, 5 * MIN));
    assert.deepEqual(pick({ search: "WORKER-1" }), ["worker-1", "worker-10", "worker-11"]);
    assert.deepEqual(pick({ search: "data/" }), ["db-3"]);
    assert.deepEqual(pick({ namespace: "data" }), ["db-3"]);
    assert.deepEqual(pick({ phase: "succeeded" }), ["worker-10", "worker-11"]);
    assert.deepEqual(pick({ failure: failureKey(rows[2]!) }), ["worker-1"]);
    assert.deepEqual(pick({ stuckOnly: true }), ["worker-2"]);
  });
});

describe("machine-time", () => {
  test("stuck: in a booting phase longer than the threshold; published, succeeded and failed never", () => {
    const fetching = row("a", [
      ["published", 9],
      ["fetching", 6],
    ]);
    assert.equal(isStuck(fetching, NOW, 5 * MIN), true);
    assert.equal(isStuck(fetching, NOW, 7 * MIN), false);
    assert.equal(isStuck(row("b", [["published", 60]]), NOW, 5 * MIN), false);
    const held = { ...fetching, pending: { phase: "running" as Phase, at: iso(NOW - MIN) } };
    assert.equal(isStuck(held, NOW, 5 * MIN), false, "a held phase counts from its report");
  });

  test("boot duration: publish to its end, or to now while booting; NaN with no publish", () => {
    const done = row("a", [
      ["published", 9],
      ["succeeded", 6],
    ]);
    assert.equal(bootMs(done, NOW), 3 * MIN);
    assert.equal(bootMs(row("b", [["published", 4]]), NOW), 4 * MIN);
    assert.ok(Number.isNaN(bootMs({ ...done, reached: {} }, NOW)));
  });
});

describe("fleet-stats", () => {
  test("phase counts at each sample rebuilt from reached and since; succeeded per step", () => {
    const rows = [
      row("a", [
        ["published", 50],
        ["fetching", 40],
        ["succeeded", 20],
      ]),
      row("b", [
        ["published", 30],
        ["fetching", 25],
      ]),
    ];
    // Samples every 10 minutes over the hour: -60, -50, …, 0; a phase counts from its instant on.
    const s = phaseSeries(rows, NOW, 60 * MIN, 7);
    assert.equal(s.start, NOW - 60 * MIN);
    assert.deepEqual(s.counts.published, [0, 1, 0, 1, 0, 0, 0]);
    assert.deepEqual(s.counts.fetching, [0, 0, 1, 1, 1, 1, 1]);
    assert.deepEqual(s.counts.succeeded, [0, 0, 0, 0, 1, 1, 1]);
    assert.deepEqual(s.succeeded, [0, 0, 0, 0, 1, 0, 0]);
  });

  test("the boot-duration histogram with nearest-rank p50 and p99; bins of 1, 2 or 5 × 10ⁿ s", () => {
    const rows = [1, 2, 3, 4, 10].map((m, i) =>
      row(`m-${i}`, [
        ["published", 30],
        ["succeeded", 30 - m],
      ]),
    );
    const h = bootHistogram(rows, 24);
    assert.equal(h.count, 5);
    assert.equal(h.p50, 3 * MIN);
    assert.equal(h.p99, 10 * MIN);
    assert.equal(h.binMs, 50_000, "600 s in 24 bins: 25 s, rounded up to 50 s");
    assert.equal(
      h.bins.reduce((a, b) => a + b, 0),
      5,
    );
    assert.equal(h.bins[Math.floor((10 * MIN) / 50_000)], 1);
    assert.ok(Number.isNaN(percentile([], 0.5)));
    assert.equal(percentile([5], 0.99), 5);
  });

  test("failures grouped by reason and exit code, the largest first; stuck counted per phase", () => {
    const failed = (name: string, reason: string, exitCode?: number) =>
      row(name, [["failed", 1]], { failure: exitCode === undefined ? { reason } : { reason, exitCode } });
    const rows = [
      failed("a", "refused", 1),
      failed("b", "refused", 1),
      failed("c", "refused", 2),
      failed("d", ""),
      row("e", [["fetching", 10]]),
      row("f", [["running", 10]]),
      row("g", [["running", 1]]),
    ];
    assert.deepEqual(
      failureGroups(rows).map((g) => [g.count, g.reason, g.exitCode]),
      [
        [2, "refused", 1],
        [1, "", undefined],
        [1, "refused", 2],
      ],
    );
    assert.deepEqual(stuckCounts(rows, NOW, 5 * MIN), [
      ["fetching", 1],
      ["running", 1],
    ]);
  });
});

test("time-text: durations in their two largest units, times relative to now", () => {
  assert.equal(durationText(0), "0s");
  assert.equal(durationText(59_400), "59s");
  assert.equal(durationText(4 * MIN + 12_000), "4m 12s");
  assert.equal(durationText(64 * MIN), "1h 4m");
  assert.equal(durationText(26 * 60 * MIN), "1d 2h");
  assert.equal(durationText(Number.NaN), "");
  assert.equal(agoText(NOW - 3 * MIN, NOW), "3m 0s ago");
  assert.equal(agoText(NOW + 5000, NOW), "in 5s");
});
