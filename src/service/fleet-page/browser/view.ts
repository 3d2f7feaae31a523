/**
 * The fleet page's DOM: the counts per phase, the storm view (storm.ts), the filters and the
 * machine table (table.ts) with the query they share, one machine's history, the message
 * line, the live badge, and the sign-in and sign-out forms. Everything from the API reaches
 * the DOM as text (textContent, never innerHTML).
 */
import { PHASES, type Phase } from "../../../machine/status-protocol.ts";
import type { StatusRecord } from "./api.ts";
import { $, el } from "./dom.ts";
import { phaseOf } from "./machine-time.ts";
import { keyOf, type Row } from "./row.ts";
import { renderStorm } from "./storm.ts";
import { PAGE_ROWS, renderTable } from "./table.ts";
import {
  DEFAULT_QUERY,
  prepareRow,
  SORT_COLUMNS,
  type SortColumn,
  selectRows,
  type TableQuery,
} from "./table-query.ts";

/** The stuck thresholds offered (ms), the default first. */
const STUCK_AFTER = [300_000, 60_000, 120_000, 900_000, 3_600_000];

/** What the table shows: the controls' state, kept here, not in the DOM. */
const query: TableQuery = { ...DEFAULT_QUERY };
let offset = 0;
let stuckAfterMs = STUCK_AFTER[0]!;

/** What the table draws (FleetSync is one). */
export interface Fleet {
  readonly rows: ReadonlyMap<string, Row>;
  readonly truncated: boolean;
  readonly selected: string;
}

/** What the page's controls do (main.ts wires them). */
export interface Actions {
  readonly signIn: (token: string) => void;
  readonly signOut: () => void;
  readonly select: (key: string) => void;
  /** A filter changed: draw the table again. */
  readonly redraw: () => void;
}

export function setMessage(text: string, kind: "info" | "error" = "info"): void {
  const box = $("message");
  box.textContent = text;
  box.dataset.kind = kind;
}

export function setLive(live: boolean): void {
  const badge = $("live");
  badge.textContent = live ? "live" : "reconnecting";
  badge.dataset.live = String(live);
}

/** Signed in: the fleet instead of the sign-in form. */
export function showFleet(): void {
  $("signin").hidden = true;
  $("fleet").hidden = false;
}

/** Signed out: the sign-in form, and nothing of the fleet left drawn. */
export function showSignIn(): void {
  $("fleet").hidden = true;
  $("signin").hidden = false;
  $("detail").replaceChildren();
  $("counts").replaceChildren();
  $("machines").replaceChildren();
  for (const id of ["chart-phases", "chart-rate", "chart-durations", "failure-groups", "stuck-groups"]) {
    $(id).replaceChildren();
  }
}

export function render(fleet: Fleet): void {
  const rows = [...fleet.rows.values()];
  const counts = new Map<string, number>(PHASES.map((p) => [p, 0]));
  for (const r of rows) counts.set(phaseOf(r), (counts.get(phaseOf(r)) ?? 0) + 1);
  $("counts").replaceChildren(
    ...[...counts].map(([phase, n]) =>
      el(
        "li",
        { "data-phase": phase },
        el("button", { type: "button", "data-phase": phase }, el("span", { class: "n" }, String(n)), phase),
      ),
    ),
  );
  $("total").textContent =
    `${rows.length} machine${rows.length === 1 ? "" : "s"}${fleet.truncated ? ` (only the first ${rows.length} are listed)` : ""}`;

  const nsSelect = $("filter-namespace") as HTMLSelectElement;
  const current = nsSelect.value;
  const namespaces = [...new Set(rows.map((r) => r.namespace))].sort();
  if (current && !namespaces.includes(current)) namespaces.push(current);
  nsSelect.replaceChildren(
    el("option", { value: "" }, "all namespaces"),
    ...namespaces.map((ns) => el("option", { value: ns }, ns)),
  );
  nsSelect.value = current;

  const now = Date.now();
  $("failure-filter").hidden = !query.failure;
  const shown = selectRows(fleet.rows, query, now, stuckAfterMs);
  offset = renderTable(shown, offset, query, fleet.selected, now, stuckAfterMs);
}

/** The storm view: drawn in a task of its own after render(), so neither blocks the page long. */
export function renderStormView(fleet: Fleet): void {
  renderStorm([...fleet.rows.values()], Date.now(), stuckAfterMs, query.failure);
}

/**
 * A page of the list just read: what the table and the charts derive from each row (parsed
 * times, sort keys) is derived now, a page at a time, not all at the first draw.
 */
export function prepare(rows: readonly Row[]): void {
  for (const r of rows) prepareRow(r);
}

export function renderLoading(key: string): void {
  $("detail").replaceChildren(el("p", {}, `loading ${key}…`));
}

export function renderDetail(record: StatusRecord): void {
  const rows = [...record.history].reverse().map((h) => {
    const output = h.output
      ? el("details", {}, el("summary", {}, "output"), el("pre", {}, h.output))
      : document.createTextNode("");
    return el(
      "tr",
      { "data-phase": h.phase },
      el("td", {}, h.at),
      el("td", { class: "phase", "data-phase": h.phase }, h.phase),
      el("td", {}, h.by),
      el("td", { class: "message" }, h.message ?? ""),
      el("td", {}, h.attempt === undefined ? "" : String(h.attempt)),
      el("td", { class: "exit" }, h.exitCode === undefined ? "" : String(h.exitCode)),
      el("td", {}, output, h.truncated ? " (truncated)" : ""),
    );
  });
  $("detail").replaceChildren(
    el("h2", {}, keyOf(record)),
    el(
      "p",
      {},
      `phase ${record.phase}, version ${record.version}, updated ${record.updatedAt}; `,
      record.config
        ? `config published ${record.config.publishedAt ?? ""} (${record.config.format ?? ""})`
        : "no config stored",
    ),
    el(
      "table",
      { class: "history" },
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          ...["at", "phase", "by", "message / reason", "attempt", "exit code", "output"].map((h) =>
            el("th", {}, h),
          ),
        ),
      ),
      el("tbody", {}, ...rows),
    ),
  );
}

/** A control changed the query: back to the first page, and draw again. */
function requery(actions: Actions): void {
  offset = 0;
  actions.redraw();
}

/** The controls' options, and the controls bound to their actions. */
export function setUp(actions: Actions): void {
  ($("filter-phase") as HTMLSelectElement).replaceChildren(
    el("option", { value: "" }, "all phases"),
    ...PHASES.map((p) => el("option", { value: p }, p)),
  );
  const stuckSelect = $("stuck-after") as HTMLSelectElement;
  stuckSelect.replaceChildren(
    ...[...STUCK_AFTER]
      .sort((a, b) => a - b)
      .map((ms) => el("option", { value: String(ms) }, `${ms / 60_000} min`)),
  );
  stuckSelect.value = String(stuckAfterMs);
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("token") as HTMLInputElement;
    const token = input.value.trim();
    input.value = "";
    if (token) actions.signIn(token);
  });
  $("signout").addEventListener("click", () => actions.signOut());
  $("filter-namespace").addEventListener("change", (e) => {
    query.namespace = (e.target as HTMLSelectElement).value;
    requery(actions);
  });
  $("filter-phase").addEventListener("change", (e) => {
    query.phase = (e.target as HTMLSelectElement).value as Phase | "";
    requery(actions);
  });
  $("search").addEventListener("input", (e) => {
    query.search = (e.target as HTMLInputElement).value;
    requery(actions);
  });
  $("filter-stuck").addEventListener("change", (e) => {
    query.stuckOnly = (e.target as HTMLInputElement).checked;
    requery(actions);
  });
  stuckSelect.addEventListener("change", () => {
    stuckAfterMs = Number(stuckSelect.value);
    requery(actions);
  });
  $("failure-filter").addEventListener("click", () => {
    query.failure = "";
    requery(actions);
  });
  $("counts").addEventListener("click", (e) => {
    const phase = (e.target as HTMLElement).closest("button")?.dataset.phase;
    if (phase === undefined) return;
    setPhase(query.phase === phase ? "" : (phase as Phase));
    requery(actions);
  });
  $("failure-groups").addEventListener("click", (e) => {
    const key = (e.target as HTMLElement).closest("button")?.dataset.failure;
    if (key === undefined) return;
    query.failure = query.failure === key ? "" : key;
    setPhase("");
    requery(actions);
  });
  $("stuck-groups").addEventListener("click", (e) => {
    const phase = (e.target as HTMLElement).closest("button")?.dataset.stuck;
    if (phase === undefined) return;
    setPhase(phase as Phase);
    query.stuckOnly = true;
    ($("filter-stuck") as HTMLInputElement).checked = true;
    requery(actions);
  });
  $("machine-head").addEventListener("click", (e) => {
    const column = (e.target as HTMLElement).closest("th")?.dataset.sort;
    if (!column || !(SORT_COLUMNS as readonly string[]).includes(column)) return;
    query.descending = query.sort === column ? !query.descending : false;
    query.sort = column as SortColumn;
    requery(actions);
  });
  $("page-prev").addEventListener("click", () => {
    offset = Math.max(0, offset - PAGE_ROWS);
    actions.redraw();
  });
  $("page-next").addEventListener("click", () => {
    offset += PAGE_ROWS;
    actions.redraw();
  });
  $("machines").addEventListener("click", (e) => {
    const key = (e.target as HTMLElement).closest("button")?.dataset.machine;
    if (key) actions.select(key);
  });
}

/** The phase filter, in the query and its select. */
function setPhase(phase: Phase | ""): void {
  query.phase = phase;
  ($("filter-phase") as HTMLSelectElement).value = phase;
}
