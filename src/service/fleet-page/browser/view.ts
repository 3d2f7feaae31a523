/**
 * The fleet page's DOM: the counts per phase, the filters, the machine table, one machine's
 * history, the message line, the live badge, and the sign-in and sign-out forms. Everything
 * from the API reaches the DOM as text (textContent, never innerHTML).
 */
import { PHASES } from "../../../machine/status-protocol.ts";
import type { StatusRecord } from "./api.ts";
import { keyOf, type Row } from "./sync.ts";

/** The most table rows drawn at once (the filter narrows them). */
const MAX_ROWS = 500;

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

const $ = <T extends HTMLElement>(id: string): T => {
  const found = document.getElementById(id);
  if (!found) throw new Error(`#${id} is missing`);
  return found as T;
};

/** An element with attributes and children; strings become text nodes. */
function el(tag: string, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElement {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(typeof c === "string" ? document.createTextNode(c) : c);
  return node;
}

const phaseOf = (r: Row) => r.pending?.phase ?? r.phase;

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
}

function filters(): { namespace: string; phase: string } {
  return {
    namespace: ($("filter-namespace") as HTMLSelectElement).value,
    phase: ($("filter-phase") as HTMLSelectElement).value,
  };
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

  const f = filters();
  const shown = rows
    .filter((r) => (!f.namespace || r.namespace === f.namespace) && (!f.phase || phaseOf(r) === f.phase))
    .sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
  const body = $("machines");
  body.replaceChildren(
    ...shown.slice(0, MAX_ROWS).map((r) => {
      const key = keyOf(r);
      const phase = phaseOf(r);
      const phaseCell = el("td", { class: "phase", "data-phase": phase }, phase);
      if (r.pending) {
        phaseCell.title = `reported at ${r.pending.at}; stored: ${r.phase}`;
        phaseCell.append(el("span", { class: "held" }, " (held)"));
      }
      const tr = el(
        "tr",
        { "data-machine": key },
        el("td", {}, r.namespace),
        el("td", {}, el("button", { type: "button", class: "link", "data-machine": key }, r.name)),
        phaseCell,
        el("td", {}, r.updatedAt ?? ""),
        el("td", {}, r.published ? "yes" : "no"),
      );
      if (key === fleet.selected) tr.classList.add("selected");
      return tr;
    }),
  );
  $("shown").textContent =
    shown.length > MAX_ROWS ? `showing ${MAX_ROWS} of ${shown.length}: narrow the filter` : "";
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

/** The phase filter's options, and the controls bound to their actions. */
export function setUp(actions: Actions): void {
  ($("filter-phase") as HTMLSelectElement).replaceChildren(
    el("option", { value: "" }, "all phases"),
    ...PHASES.map((p) => el("option", { value: p }, p)),
  );
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("token") as HTMLInputElement;
    const token = input.value.trim();
    input.value = "";
    if (token) actions.signIn(token);
  });
  $("signout").addEventListener("click", () => actions.signOut());
  $("filter-namespace").addEventListener("change", () => actions.redraw());
  $("filter-phase").addEventListener("change", () => actions.redraw());
  $("counts").addEventListener("click", (e) => {
    const phase = (e.target as HTMLElement).closest("button")?.dataset.phase;
    if (phase === undefined) return;
    const sel = $("filter-phase") as HTMLSelectElement;
    sel.value = sel.value === phase ? "" : phase;
    actions.redraw();
  });
  $("machines").addEventListener("click", (e) => {
    const key = (e.target as HTMLElement).closest("button")?.dataset.machine;
    if (key) actions.select(key);
  });
}
