/**
 * The promtool peer (Debian 12's prometheus 2.42 package, binary only): the pinned version,
 * and `check metrics` refusing what the service must not export (a gauge named like a
 * counter) while accepting a clean exposition.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { peer } from "../helpers/peers.ts";

const promtool = peer("PROMTOOL");
const run = (args: string[], input?: string) =>
  spawnSync(promtool, args, { input, encoding: "utf8", timeout: 60_000 });

test("promtool is 2.42.0", () => {
  const r = run(["--version"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(`${r.stdout}${r.stderr}`, /^promtool, version 2\.42\.0\+ds /);
});

test("check metrics: a gauge ending in _total is refused (exit 3), a clean exposition passes", () => {
  const bad = run(
    ["check", "metrics"],
    "# HELP x_active_total Active things.\n# TYPE x_active_total gauge\nx_active_total 3\n",
  );
  assert.equal(bad.status, 3);
  assert.match(bad.stdout + bad.stderr, /x_active_total non-counter metrics should not have "_total" suffix/);
  const good = run(
    ["check", "metrics"],
    '# HELP x_requests_total Requests.\n# TYPE x_requests_total counter\nx_requests_total{route="/a"} 3\n',
  );
  assert.equal(good.status, 0, good.stdout + good.stderr);
});
