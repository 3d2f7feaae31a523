/**
 * The machine table: the rows table-query.ts selects, one page of PAGE_ROWS at a time (a
 * 20,000-machine fleet draws 200 rows, not 20,000), each with its phase (held, stuck), how
 * long it has been in it, its boot's duration, when it was updated (relative, the time itself
 * on hover), its failure reason and exit code, its Cluster API names and whether a config is
 * stored. Everything from the API reaches the DOM as text.
 */
import { $, el } from "./dom.ts";
import { bootMs, isStuck, phaseOf, sinceOf, timesOf } from "./machine-time.ts";
import { keyOf, type Row } from "./row.ts";
import type { TableQuery } from "./table-query.ts";
import { agoText, durationText } from "./time-text.ts";

export const PAGE_ROWS = 200;

const iso = (ms: number) => (Number.isFinite(ms) ? new Date(ms).toISOString() : "");

function row(r: Row, now: number, stuckAfterMs: number, selected: boolean): HTMLElement {
  const key = keyOf(r);
  const phase = phaseOf(r);
  const since = sinceOf(r);
  const phaseCell = el("td", { class: "phase", "data-phase": phase }, phase);
  if (r.pending) {
    phaseCell.title = `reported at ${r.pending.at}; stored: ${r.phase}`;
    phaseCell.append(el("span", { class: "held" }, " (held)"));
  }
  const stuck = isStuck(r, now, stuckAfterMs);
  if (stuck)
    phaseCell.append(
      el("span", { class: "stuck", title: `stuck: in ${phase} since ${iso(since)}` }, " stuck"),
    );
  const done = phase === "succeeded" || phase === "failed";
  const boot = bootMs(r, now);
  const failure =
    phase === "failed" && r.failure
      ? [
          r.failure.reason || "(no reason given)",
          r.failure.exitCode === undefined ? "" : ` (exit ${r.failure.exitCode})`,
        ].join("")
      : "";
  const capi = r.capi
    ? [r.capi.cluster, r.capi.machine, r.capi.bootsealConfig].filter(Boolean).join(" / ")
    : "";
  const updated = timesOf(r).updated;
  const tr = el(
    "tr",
    { "data-machine": key },
    el("td", {}, r.namespace),
    el("td", {}, el("button", { type: "button", class: "link", "data-machine": key }, r.name)),
    phaseCell,
    el("td", { class: "in-phase", title: iso(since) }, done ? "" : durationText(now - since)),
    el(
      "td",
      { class: "boot", title: `published ${r.reached?.published ?? "?"}` },
      durationText(boot) + (done || !Number.isFinite(boot) ? "" : " so far"),
    ),
    el("td", { class: "updated", title: iso(updated) }, agoText(updated, now)),
    el("td", { class: "reason" }, failure),
    el(
      "td",
      {
        class: "capi",
        title: r.capi
          ? `Cluster ${r.capi.cluster ?? "?"}, Machine ${r.capi.machine ?? "?"}, BootsealConfig ${r.capi.bootsealConfig ?? "?"}`
          : "",
      },
      capi,
    ),
    el("td", {}, r.published ? "yes" : "no"),
  );
  if (stuck) tr.classList.add("stuck");
  if (selected) tr.classList.add("selected");
  return tr;
}

/** Draws rows [offset, offset + PAGE_ROWS) of `shown`; the offset actually used is returned. */
export function renderTable(
  shown: readonly Row[],
  offset: number,
  q: TableQuery,
  selected: string,
  now: number,
  stuckAfterMs: number,
): number {
  const start = Math.max(
    0,
    Math.min(offset, Math.floor(Math.max(0, shown.length - 1) / PAGE_ROWS) * PAGE_ROWS),
  );
  const page = shown.slice(start, start + PAGE_ROWS);
  $("machines").replaceChildren(...page.map((r) => row(r, now, stuckAfterMs, keyOf(r) === selected)));
  $("shown").textContent =
    shown.length === 0 ? "no machine matches" : `${start + 1}–${start + page.length} of ${shown.length}`;
  ($("page-prev") as HTMLButtonElement).disabled = start === 0;
  ($("page-next") as HTMLButtonElement).disabled = start + PAGE_ROWS >= shown.length;
  for (const th of document.querySelectorAll<HTMLElement>("#machine-head th[data-sort]")) {
    const sorted = th.dataset.sort === q.sort;
    th.setAttribute("aria-sort", sorted ? (q.descending ? "descending" : "ascending") : "none");
  }
  return start;
}
