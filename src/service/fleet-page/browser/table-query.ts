/**
 * Which machines the table lists and in what order: the filters (namespace, phase, a search on
 * the name, one failure reason, stuck only) and the sort by a column, names in natural order
 * (`worker-2` before `worker-10`). Pure (no DOM): the unit tests run it under Node.
 */
import { PHASE_ORDER, type Phase } from "../../../machine/status-protocol.ts";
import { failureKey } from "./fleet-stats.ts";
import { bootMs, isStuck, phaseOf, sinceOf, timesOf } from "./machine-time.ts";
import type { Row } from "./row.ts";

export const SORT_COLUMNS = ["name", "phase", "inPhase", "boot", "updated"] as const;
export type SortColumn = (typeof SORT_COLUMNS)[number];

export interface TableQuery {
  namespace: string;
  phase: "" | Phase;
  /** Part of `namespace/name`, or of a Cluster API name, in any case. */
  search: string;
  /** One failure group's key (fleet-stats.ts failureKey), or "". */
  failure: string;
  stuckOnly: boolean;
  sort: SortColumn;
  descending: boolean;
}

export const DEFAULT_QUERY: TableQuery = {
  namespace: "",
  phase: "",
  search: "",
  failure: "",
  stuckOnly: false,
  sort: "name",
  descending: false,
};

/**
 * A key whose plain string order is the natural order: each run of digits becomes its length
 * (one character from "1" up) and its digits without leading zeros, so a longer number sorts
 * after a shorter one. Names are DNS labels (lower case, digits, `-`): a length character
 * stays below the letters for runs of up to 48 digits.
 */
export function naturalKey(text: string): string {
  return text.replace(/\d+/g, (run) => {
    const digits = run.replace(/^0+(?=\d)/, "");
    return String.fromCharCode(0x30 + Math.min(digits.length, 0x4f)) + digits;
  });
}

/** Per row object (rows are replaced, not changed): a draw keys only the rows that changed. */
const nameKeys = new WeakMap<Row, string>();
function nameKey(r: Row): string {
  let key = nameKeys.get(r);
  if (key === undefined) {
    key = `${naturalKey(r.namespace)}\u0000${naturalKey(r.name)}`;
    nameKeys.set(r, key);
  }
  return key;
}

/** The sort value of a row in a column other than the name (NaN when not known). */
function sortValue(r: Row, column: Exclude<SortColumn, "name">, now: number): number {
  switch (column) {
    case "phase":
      return PHASE_ORDER.get(phaseOf(r)) ?? -1;
    case "inPhase":
      return now - sinceOf(r);
    case "boot":
      return bootMs(r, now);
    case "updated":
      return timesOf(r).updated;
  }
}

/**
 * Every machine's key in natural name order, sorted again only when a machine comes or goes:
 * a draw in a storm (rows changing, the set of machines not) walks it instead of sorting
 * 20,000 names.
 */
let nameOrder: { keys: string[]; known: Set<string> } = { keys: [], known: new Set() };

function orderedKeys(rows: ReadonlyMap<string, Row>): string[] {
  let same = nameOrder.keys.length === rows.size;
  if (same) for (const key of rows.keys()) if (!nameOrder.known.has(key)) same = false;
  if (!same) {
    const byName = [...rows].map(([key, r]) => [key, nameKey(r)] as const);
    byName.sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    const keys = byName.map(([key]) => key);
    nameOrder = { keys, known: new Set(keys) };
  }
  return nameOrder.keys;
}

/** Derives (and keeps) what sorting and the charts read of a row. */
export function prepareRow(r: Row): void {
  nameKey(r);
  timesOf(r);
}

/** What the search matches in a row (lower case). */
function searchText(r: Row): string {
  const capi = r.capi
    ? ` ${r.capi.cluster ?? ""} ${r.capi.machine ?? ""} ${r.capi.bootsealConfig ?? ""}`
    : "";
  return `${r.namespace}/${r.name}${capi}`.toLowerCase();
}

/** The rows the query keeps, sorted (ties by name; unknown values last). */
export function selectRows(
  rows: ReadonlyMap<string, Row>,
  q: TableQuery,
  now: number,
  stuckAfterMs: number,
): Row[] {
  const search = q.search.trim().toLowerCase();
  const keeps = (r: Row) =>
    (!q.namespace || r.namespace === q.namespace) &&
    (!q.phase || phaseOf(r) === q.phase) &&
    (!q.failure || (phaseOf(r) === "failed" && failureKey(r) === q.failure)) &&
    (!q.stuckOnly || isStuck(r, now, stuckAfterMs)) &&
    (!search || searchText(r).includes(search));
  const kept: Row[] = [];
  for (const key of orderedKeys(rows)) {
    const r = rows.get(key)!;
    if (keeps(r)) kept.push(r);
  }
  if (q.sort === "name") return q.descending ? kept.reverse() : kept;
  const column = q.sort;
  const sign = q.descending ? -1 : 1;
  // Numbers only; ties keep the name order (their index in it).
  const sorted = kept.map((r, i) => ({ r, v: sortValue(r, column, now), i }));
  sorted.sort((a, b) => {
    const ua = !Number.isFinite(a.v);
    const ub = !Number.isFinite(b.v);
    if (ua || ub) return ua === ub ? a.i - b.i : ua ? 1 : -1;
    return a.v === b.v ? a.i - b.i : (a.v - b.v) * sign;
  });
  return sorted.map((x) => x.r);
}
