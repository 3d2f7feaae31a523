/**
 * The machines the page knows, kept level-triggered (design.md "Events and replicas"): the
 * list is read whole from GET /v1/machines (every page, `next` after `next`) at sign-in, after
 * every reconnect of the event stream and every RECONCILE_MS; an event on /v1/events only wakes
 * the page up, which then re-reads the status of the machine it names. A phase an event
 * reported that the store does not have yet (held by the service, 202) is kept as the row's
 * `pending` phase, and the machine is read again after PENDING_RECHECK_MS.
 * No DOM: what happens is told through `SyncEvents` (main.ts hands it to view.ts).
 */

import { bootSummary } from "../../../machine/boot-summary.ts";
import type { Phase } from "../../../machine/status-protocol.ts";
import {
  errorText,
  isAbort,
  listMachines,
  machineStatus,
  openEvents,
  Refused,
  readEvents,
  type StatusRecord,
  type Summary,
} from "./api.ts";
import { keyOf, type Reported, type Row } from "./row.ts";
import { SseParser } from "./sse.ts";

/** The most machines the page lists (more are counted as "not listed"). */
const MAX_MACHINES = 20_000;
const RECONCILE_MS = 30_000;
/** A reported phase held by the service (202) reaches the store within its coalesce window. */
const PENDING_RECHECK_MS = 6_000;
/**
 * Status reads woken by events, one per machine at a time and at most READS_AT_ONCE in all:
 * a boot storm's events (six per machine) become about one read per machine, however many
 * arrive while its read is under way.
 */
const READS_AT_ONCE = 6;

/** Two summaries of one status record version (its updates all move updatedAt or version). */
const sameRecord = (a: Summary, b: Summary) =>
  a.updatedAt === b.updatedAt &&
  a.version === b.version &&
  a.phase === b.phase &&
  a.published === b.published;

export interface SyncEvents {
  /** The rows changed. */
  readonly changed: () => void;
  /** A page of the list was read (before the rows change to the whole list). */
  readonly pageRead: (rows: readonly Row[]) => void;
  /** The selected machine's status was read. */
  readonly selectedRead: (record: StatusRecord) => void;
  /** The event stream is connected (true) or reconnecting (false). */
  readonly live: (live: boolean) => void;
  /** A machine's status could not be read. */
  readonly failed: (text: string) => void;
  /** The service refused the credential (with its error code, or ""). */
  readonly refused: (code: string) => void;
}

export class FleetSync {
  rows = new Map<string, Row>();
  truncated = false;
  /** The machine whose history is shown ("" for none). */
  selected = "";
  #token = "";
  #lastEventId = "";
  #abort: AbortController | null = null;
  #reconcile = 0;
  readonly #rechecks = new Map<string, number>();
  readonly #woken = new Map<string, Reported>();
  readonly #inFlight = new Set<string>();
  readonly #on: SyncEvents;

  constructor(on: SyncEvents) {
    this.#on = on;
  }

  /** Starts a session with this token; the signal ends at stop(). */
  begin(token: string): AbortSignal {
    this.#token = token;
    const abort = new AbortController();
    this.#abort = abort;
    return abort.signal;
  }

  /** Once the first list is read: reconcile every RECONCILE_MS and follow the event stream. */
  follow(signal: AbortSignal): void {
    this.#reconcile = window.setInterval(() => {
      this.loadAll(signal).catch((err) => {
        if (err instanceof Refused) this.#on.refused(err.message);
      });
    }, RECONCILE_MS);
    void this.#streamEvents(signal);
  }

  /** Signed out: every read stops and everything the session knew is forgotten. */
  stop(): void {
    this.#abort?.abort();
    this.#abort = null;
    window.clearInterval(this.#reconcile);
    for (const t of this.#rechecks.values()) window.clearTimeout(t);
    this.#rechecks.clear();
    this.#woken.clear();
    this.#token = "";
    this.rows = new Map();
    this.selected = "";
    this.#lastEventId = "";
  }

  /** The whole list, page after page (level-triggered: replaces what the page had). */
  async loadAll(signal: AbortSignal): Promise<void> {
    const rows = new Map<string, Row>();
    let after = "";
    let truncated = false;
    for (;;) {
      const page = await listMachines(this.#token, after, signal);
      const read = page.items.map((item) => this.#keepPending(item));
      for (const row of read) rows.set(keyOf(row), row);
      this.#on.pageRead(read);
      if (!page.next) break;
      if (rows.size >= MAX_MACHINES) {
        truncated = true;
        break;
      }
      after = page.next;
    }
    this.rows = rows;
    this.truncated = truncated;
    this.#on.changed();
  }

  /** A stored summary, keeping a newer reported phase the store does not have yet. */
  #keepPending(s: Summary): Row {
    const old = this.rows.get(keyOf(s));
    const pending = old?.pending;
    if (pending && (!s.updatedAt || s.updatedAt < pending.at) && s.phase !== pending.phase) {
      return { ...s, pending };
    }
    // The same record as before: the same row object, so what the view derived from it
    // (parsed times, sort keys: kept per row object) is not derived again for 20,000 rows.
    if (old && !old.pending && sameRecord(old, s)) return old;
    return { ...s };
  }

  #wake(ns: string, name: string, reported: Reported): void {
    const key = `${ns}/${name}`;
    const before = this.#woken.get(key);
    if (!before || before.at <= reported.at) this.#woken.set(key, reported);
    this.#pump();
  }

  #pump(): void {
    for (const [key, reported] of this.#woken) {
      if (this.#inFlight.size >= READS_AT_ONCE) return;
      if (this.#inFlight.has(key)) continue;
      this.#woken.delete(key);
      this.#inFlight.add(key);
      const [ns, name] = key.split("/") as [string, string];
      void this.refresh(ns, name, reported).finally(() => {
        this.#inFlight.delete(key);
        this.#pump();
      });
    }
  }

  /** Reads one machine's status (an event named it, or it was selected). */
  async refresh(ns: string, name: string, reported?: Reported): Promise<void> {
    const key = `${ns}/${name}`;
    let record: StatusRecord | undefined;
    try {
      record = await machineStatus(this.#token, ns, name, this.#abort?.signal);
    } catch (err) {
      if (err instanceof Refused) return this.#on.refused(err.message);
      if (isAbort(err)) return;
      this.#on.failed(`could not read ${key}: ${errorText(err)}`);
      return;
    }
    const row: Row = {
      namespace: record.namespace,
      name: record.name,
      phase: record.phase,
      version: record.version,
      updatedAt: record.updatedAt,
      published: record.config !== null,
      ...(record.config?.capi ? { capi: record.config.capi } : {}),
      ...bootSummary(record),
    };
    const old = this.rows.get(key);
    const pending = reported ?? old?.pending;
    if (pending && record.updatedAt < pending.at && record.phase !== pending.phase) {
      row.pending = pending;
      if (!this.#rechecks.has(key)) {
        this.#rechecks.set(
          key,
          window.setTimeout(() => {
            this.#rechecks.delete(key);
            void this.refresh(ns, name);
          }, PENDING_RECHECK_MS),
        );
      }
    }
    this.rows.set(key, row);
    this.#on.changed();
    if (this.selected === key) this.#on.selectedRead(record);
  }

  /** Reads /v1/events until signed out; reconnects with Last-Event-ID, then reconciles. */
  async #streamEvents(signal: AbortSignal): Promise<void> {
    let delay = 2000;
    while (!signal.aborted) {
      try {
        const opened = await openEvents(this.#token, this.#lastEventId, signal);
        if ("refused" in opened) return this.#on.refused(opened.refused);
        this.#on.live(true);
        // Anything missed while disconnected is read from the list (the ring buffer is bounded).
        if (this.#lastEventId) await this.loadAll(signal);
        const parser = new SseParser((e) => {
          this.#lastEventId = e.lastEventId;
          if (e.type !== "status") return;
          try {
            const ev = JSON.parse(e.data) as { namespace: string; name: string; phase: Phase; at: string };
            this.#wake(ev.namespace, ev.name, { phase: ev.phase, at: ev.at });
          } catch {
            // Not JSON: nothing to wake up for.
          }
        });
        await readEvents(opened.body, parser);
        if (parser.retryMs !== undefined) delay = parser.retryMs;
      } catch (err) {
        if (signal.aborted || isAbort(err)) return;
        if (err instanceof Refused) return this.#on.refused(err.message);
      }
      this.#on.live(false);
      await new Promise((r) => window.setTimeout(r, delay));
    }
  }
}
