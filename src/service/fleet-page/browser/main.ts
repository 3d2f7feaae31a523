/**
 * The fleet page (docs/api.md "The fleet page"). Level-triggered (design.md "Events and
 * replicas"): the machine list is read from GET /v1/machines (every page, `next` after
 * `next`) at sign-in, after every reconnect of the event stream and every RECONCILE_MS; an
 * event on /v1/events only wakes the page up, which then re-reads the status of the machine
 * it names. The stream is read with fetch() (EventSource cannot send the bearer token) and
 * resumed with Last-Event-ID.
 *
 * The token is kept in sessionStorage only (this tab, until it closes); a 401 or 403 clears it.
 * Everything from the API reaches the DOM as text (textContent, never innerHTML).
 */
import { SseParser } from "./sse.ts";

const PHASES = ["published", "fetching", "decrypted", "written", "running", "succeeded", "failed"] as const;
const TOKEN_KEY = "bootseal.fleet.token";
const PAGE_LIMIT = 1000;
/** The most machines the page lists (more are counted as "not listed"). */
const MAX_MACHINES = 20_000;
/** The most table rows drawn at once (the filter narrows them). */
const MAX_ROWS = 500;
const RECONCILE_MS = 30_000;
/** A reported phase held by the service (202) reaches the store within its coalesce window. */
const PENDING_RECHECK_MS = 6_000;

interface Summary {
  namespace: string;
  name: string;
  phase: string;
  version: number;
  updatedAt?: string;
  published?: boolean;
}

interface HistoryEntry {
  phase: string;
  at: string;
  by: string;
  message?: string;
  attempt?: number;
  exitCode?: number;
  output?: string;
  version: number;
  truncated?: boolean;
}

interface StatusRecord extends Summary {
  updatedAt: string;
  config: { publishedAt?: string; format?: string } | null;
  history: HistoryEntry[];
}

interface Row extends Summary {
  /** A phase reported (event) after the stored one: held by the service, not yet written. */
  pending?: { phase: string; at: string };
}

class Refused extends Error {}

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

const keyOf = (m: { namespace: string; name: string }) => `${m.namespace}/${m.name}`;
const phaseOf = (r: Row) => r.pending?.phase ?? r.phase;

const state = {
  token: "" as string,
  rows: new Map<string, Row>(),
  truncated: false,
  selected: "" as string,
  lastEventId: "",
  abort: null as AbortController | null,
  reconcile: 0 as number,
  live: false,
};

function setMessage(text: string, kind: "info" | "error" = "info"): void {
  const box = $("message");
  box.textContent = text;
  box.dataset.kind = kind;
}

async function api<T>(path: string, signal?: AbortSignal): Promise<T> {
  const res = await fetch(path, {
    headers: { authorization: `Bearer ${state.token}`, accept: "application/json" },
    cache: "no-store",
    ...(signal ? { signal } : {}),
  });
  if (res.status === 401 || res.status === 403) throw new Refused(await errorCode(res));
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status} ${await errorCode(res)}`);
  return (await res.json()) as T;
}

async function errorCode(res: Response): Promise<string> {
  try {
    const body = (await res.json()) as { code?: unknown };
    return typeof body.code === "string" ? body.code : "";
  } catch {
    return "";
  }
}

/** The whole list, page after page (level-triggered: replaces what the page had). */
async function loadAll(signal: AbortSignal): Promise<void> {
  const rows = new Map<string, Row>();
  let after = "";
  let truncated = false;
  for (;;) {
    const q = new URLSearchParams({ limit: String(PAGE_LIMIT) });
    if (after) q.set("after", after);
    const page = await api<{ items: Summary[]; next?: string }>(`v1/machines?${q}`, signal);
    for (const item of page.items) rows.set(keyOf(item), keepPending(item));
    if (!page.next) break;
    if (rows.size >= MAX_MACHINES) {
      truncated = true;
      break;
    }
    after = page.next;
  }
  state.rows = rows;
  state.truncated = truncated;
  render();
}

/** A stored summary, keeping a newer reported phase the store does not have yet. */
function keepPending(s: Summary): Row {
  const old = state.rows.get(keyOf(s));
  const pending = old?.pending;
  if (pending && (!s.updatedAt || s.updatedAt < pending.at) && s.phase !== pending.phase) {
    return { ...s, pending };
  }
  return { ...s };
}

const rechecks = new Map<string, number>();

/**
 * Status reads woken by events, one per machine at a time and at most READS_AT_ONCE in all:
 * a boot storm's events (six per machine) become about one read per machine, however many
 * arrive while its read is under way.
 */
const READS_AT_ONCE = 6;
const woken = new Map<string, { phase: string; at: string }>();
const inFlight = new Set<string>();

function wake(ns: string, name: string, reported: { phase: string; at: string }): void {
  const key = `${ns}/${name}`;
  const before = woken.get(key);
  if (!before || before.at <= reported.at) woken.set(key, reported);
  pump();
}

function pump(): void {
  for (const [key, reported] of woken) {
    if (inFlight.size >= READS_AT_ONCE) return;
    if (inFlight.has(key)) continue;
    woken.delete(key);
    inFlight.add(key);
    const [ns, name] = key.split("/") as [string, string];
    void refreshMachine(ns, name, reported).finally(() => {
      inFlight.delete(key);
      pump();
    });
  }
}

/** An event named this machine: read its status (and its history when it is open). */
async function refreshMachine(ns: string, name: string, reported?: { phase: string; at: string }) {
  const key = `${ns}/${name}`;
  let record: StatusRecord | undefined;
  try {
    record = await api<StatusRecord>(
      `v1/machines/${encodeURIComponent(ns)}/${encodeURIComponent(name)}/status`,
      state.abort?.signal,
    );
  } catch (err) {
    if (err instanceof Refused) return refused(err.message);
    if (isAbort(err)) return;
    setMessage(`could not read ${key}: ${errorText(err)}`, "error");
    return;
  }
  const row: Row = {
    namespace: record.namespace,
    name: record.name,
    phase: record.phase,
    version: record.version,
    updatedAt: record.updatedAt,
    published: record.config !== null,
  };
  const old = state.rows.get(key);
  const pending = reported ?? old?.pending;
  if (pending && record.updatedAt < pending.at && record.phase !== pending.phase) {
    row.pending = pending;
    if (!rechecks.has(key)) {
      rechecks.set(
        key,
        window.setTimeout(() => {
          rechecks.delete(key);
          void refreshMachine(ns, name);
        }, PENDING_RECHECK_MS),
      );
    }
  }
  state.rows.set(key, row);
  render();
  if (state.selected === key) renderDetail(record);
}

function isAbort(err: unknown): boolean {
  return err instanceof DOMException && err.name === "AbortError";
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Reads /v1/events until signed out; reconnects with Last-Event-ID, then reconciles. */
async function streamEvents(signal: AbortSignal): Promise<void> {
  let delay = 2000;
  while (!signal.aborted) {
    try {
      const headers: Record<string, string> = {
        authorization: `Bearer ${state.token}`,
        accept: "text/event-stream",
      };
      if (state.lastEventId) headers["last-event-id"] = state.lastEventId;
      const res = await fetch("v1/events", { headers, cache: "no-store", signal });
      if (res.status === 401 || res.status === 403) return refused(await errorCode(res));
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      setLive(true);
      // Anything missed while disconnected is read from the list (the ring buffer is bounded).
      if (state.lastEventId) await loadAll(signal);
      const parser = new SseParser((e) => {
        state.lastEventId = e.lastEventId;
        if (e.type !== "status") return;
        try {
          const ev = JSON.parse(e.data) as { namespace: string; name: string; phase: string; at: string };
          wake(ev.namespace, ev.name, { phase: ev.phase, at: ev.at });
        } catch {
          // Not JSON: nothing to wake up for.
        }
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.push(value);
      }
      if (parser.retryMs !== undefined) delay = parser.retryMs;
    } catch (err) {
      if (signal.aborted || isAbort(err)) return;
      if (err instanceof Refused) return refused(err.message);
    }
    setLive(false);
    await new Promise((r) => window.setTimeout(r, delay));
  }
}

function setLive(live: boolean): void {
  state.live = live;
  const badge = $("live");
  badge.textContent = live ? "live" : "reconnecting";
  badge.dataset.live = String(live);
}

function refused(code: string): void {
  signOut();
  setMessage(`refused${code ? ` (${code})` : ""}: the credential was not accepted; sign in again`, "error");
}

function signOut(): void {
  state.abort?.abort();
  state.abort = null;
  window.clearInterval(state.reconcile);
  for (const t of rechecks.values()) window.clearTimeout(t);
  rechecks.clear();
  woken.clear();
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = "";
  state.rows = new Map();
  state.selected = "";
  state.lastEventId = "";
  $("fleet").hidden = true;
  $("signin").hidden = false;
  $("detail").replaceChildren();
  $("counts").replaceChildren();
  $("machines").replaceChildren();
  setMessage("signed out");
}

async function signIn(token: string): Promise<void> {
  state.token = token;
  const abort = new AbortController();
  state.abort = abort;
  setMessage("loading…");
  try {
    await loadAll(abort.signal);
  } catch (err) {
    if (err instanceof Refused) return refused(err.message);
    if (isAbort(err)) return;
    setMessage(`could not list machines: ${errorText(err)}`, "error");
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("signin").hidden = true;
  $("fleet").hidden = false;
  setMessage("");
  state.reconcile = window.setInterval(() => {
    loadAll(abort.signal).catch((err) => {
      if (err instanceof Refused) refused(err.message);
    });
  }, RECONCILE_MS);
  void streamEvents(abort.signal);
}

function filters(): { namespace: string; phase: string } {
  return {
    namespace: ($("filter-namespace") as HTMLSelectElement).value,
    phase: ($("filter-phase") as HTMLSelectElement).value,
  };
}

function render(): void {
  const rows = [...state.rows.values()];
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
    `${rows.length} machine${rows.length === 1 ? "" : "s"}${state.truncated ? ` (only the first ${rows.length} are listed)` : ""}`;

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
      if (key === state.selected) tr.classList.add("selected");
      return tr;
    }),
  );
  $("shown").textContent =
    shown.length > MAX_ROWS ? `showing ${MAX_ROWS} of ${shown.length}: narrow the filter` : "";
}

function renderDetail(record: StatusRecord): void {
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

async function select(key: string): Promise<void> {
  state.selected = key;
  const [ns, name] = key.split("/") as [string, string];
  render();
  $("detail").replaceChildren(el("p", {}, `loading ${key}…`));
  await refreshMachine(ns, name);
}

function setUp(): void {
  ($("filter-phase") as HTMLSelectElement).replaceChildren(
    el("option", { value: "" }, "all phases"),
    ...PHASES.map((p) => el("option", { value: p }, p)),
  );
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("token") as HTMLInputElement;
    const token = input.value.trim();
    input.value = "";
    if (token) void signIn(token);
  });
  $("signout").addEventListener("click", () => signOut());
  $("filter-namespace").addEventListener("change", () => render());
  $("filter-phase").addEventListener("change", () => render());
  $("counts").addEventListener("click", (e) => {
    const phase = (e.target as HTMLElement).closest("button")?.dataset.phase;
    if (phase === undefined) return;
    const sel = $("filter-phase") as HTMLSelectElement;
    sel.value = sel.value === phase ? "" : phase;
    render();
  });
  $("machines").addEventListener("click", (e) => {
    const key = (e.target as HTMLElement).closest("button")?.dataset.machine;
    if (key) void select(key);
  });
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) void signIn(saved);
}

setUp();
