/**
 * The storm view above the table: the phase counts over the last hour, `succeeded` per minute,
 * the boot-duration histogram with p50 and p99 (charts.ts), the failures grouped by reason and
 * the stuck machines per phase, each group a button that filters the table to it.
 */
import type { Phase } from "../../../machine/status-protocol.ts";
import { histogramChart, phaseChart, phaseLegend, rateChart } from "./charts.ts";
import { $, el } from "./dom.ts";
import { bootHistogram, failureGroups, phaseSeries, stuckCounts } from "./fleet-stats.ts";
import type { Row } from "./row.ts";
import { durationText } from "./time-text.ts";

/** How many failure groups are listed (the rest are counted). */
const MAX_GROUPS = 20;

export function renderStorm(
  rows: readonly Row[],
  now: number,
  stuckAfterMs: number,
  activeFailure: string,
): void {
  const series = phaseSeries(rows, now);
  const histogram = bootHistogram(rows);
  $("chart-phases").replaceChildren(phaseChart(series), phaseLegend());
  $("chart-rate").replaceChildren(rateChart(series));
  $("chart-durations").replaceChildren(histogramChart(histogram));
  $("percentiles").textContent =
    histogram.count === 0
      ? "(none succeeded yet)"
      : `${histogram.count} booted, p50 ${durationText(histogram.p50)}, p99 ${durationText(histogram.p99)}`;

  const groups = failureGroups(rows);
  $("failure-groups").replaceChildren(
    ...groups.slice(0, MAX_GROUPS).map((g) =>
      el(
        "li",
        {},
        el(
          "button",
          {
            type: "button",
            class: "group",
            "data-failure": g.key,
            "aria-pressed": String(g.key === activeFailure),
          },
          el("span", { class: "n" }, `${g.count} ×`),
          ` ${g.reason || "(no reason given)"}`,
          g.exitCode === undefined ? "" : ` (exit ${g.exitCode})`,
        ),
      ),
    ),
    ...(groups.length > MAX_GROUPS ? [el("li", {}, `and ${groups.length - MAX_GROUPS} more reasons`)] : []),
    ...(groups.length === 0 ? [el("li", { class: "none" }, "no failures")] : []),
  );

  const stuck = stuckCounts(rows, now, stuckAfterMs);
  $("stuck-groups").replaceChildren(
    ...stuck.map(([phase, n]: [Phase, number]) =>
      el(
        "li",
        {},
        el(
          "button",
          { type: "button", class: "group", "data-stuck": phase },
          el("span", { class: "n" }, `${n} ×`),
          ` in ${phase} for over ${durationText(stuckAfterMs)}`,
        ),
      ),
    ),
    ...(stuck.length === 0 ? [el("li", { class: "none" }, "none stuck")] : []),
  );
}
