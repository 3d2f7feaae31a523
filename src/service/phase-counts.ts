/**
 * Machines per phase, fleet-wide (`bootseal_machines{phase}`): counted from the store's status
 * records, so every replica reports the same numbers whichever replica wrote them. A count is
 * one listing of the status records plus a read of each record whose version (its ETag in the
 * listing) changed since this replica's previous count and is not the version this replica
 * last wrote or read (its record cache): at 10,000 machines, a steady fleet costs one listing
 * (10 pages on S3) per refresh, a restart 10,000 reads once, and a boot storm served by one
 * replica no read at all (with a scrape every few seconds, re-reading every record the storm
 * changed was one store read more per machine).
 *
 * At most one count per `refreshMs` (single flight: concurrent scrapes share it). A scrape
 * waits for a count in flight at most `waitMs`, then serves the last complete count; a count
 * is abandoned after `deadlineMs`, keeping what it read for the next one. Only complete counts
 * are served.
 */
import type { CallOptions } from "../call-options.ts";
import { hasCode } from "../errors.ts";
import { formatMachineId, type MachineId } from "../machine/machine-id.ts";
import { PHASES, type Phase } from "../machine/status-protocol.ts";

/** What a count reads: machine-store's listing with versions, and one record's phase. */
export interface StatusSource {
  statusVersions(
    options?: CallOptions,
  ): AsyncIterable<{ readonly machine: MachineId; readonly etag: string }>;
  /** The phase of the record at the listed version `etag` (null: gone); machine-store's. */
  readPhase(m: MachineId, etag: string, options?: CallOptions): Promise<Phase | null>;
}

export interface PhaseCount {
  readonly counts: Readonly<Record<Phase, number>>;
  /** When the count began (ms since the epoch): it saw every record written before that. */
  readonly startedAt: number;
}

export interface PhaseCounterOptions {
  readonly source: StatusSource;
  readonly refreshMs: number;
  readonly waitMs?: number;
  readonly deadlineMs?: number;
  readonly now?: () => number;
  /** A count that failed (the store did not answer): counted, never thrown at a scrape. */
  readonly failed?: (err: unknown) => void;
}

const READ_CONCURRENCY = 8;
const PHASE_SET: ReadonlySet<string> = new Set(PHASES);

interface Known {
  etag: string;
  phase: Phase | null;
  pass: number;
}

export class PhaseCounter {
  readonly #source: StatusSource;
  readonly #refreshMs: number;
  readonly #waitMs: number;
  readonly #deadlineMs: number;
  readonly #now: () => number;
  readonly #failed: (err: unknown) => void;
  readonly #known = new Map<string, Known>();
  readonly #closed = new AbortController();
  #last: PhaseCount | undefined;
  #running: Promise<void> | undefined;
  #lastStart = Number.NEGATIVE_INFINITY;
  #pass = 0;

  constructor(options: PhaseCounterOptions) {
    this.#source = options.source;
    this.#refreshMs = options.refreshMs;
    this.#waitMs = options.waitMs ?? 5000;
    this.#deadlineMs = options.deadlineMs ?? 60_000;
    this.#now = options.now ?? Date.now;
    this.#failed = options.failed ?? (() => {});
  }

  /** The last complete count, after starting a new one when it is due (and waiting a little for it). */
  async current(): Promise<PhaseCount | undefined> {
    if (this.#closed.signal.aborted) return this.#last;
    if (!this.#running && this.#now() - this.#lastStart >= this.#refreshMs) this.#start();
    const running = this.#running;
    if (running) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        running,
        new Promise<void>((resolve) => (timer = setTimeout(resolve, this.#waitMs))),
      ]);
      clearTimeout(timer);
    }
    return this.#last;
  }

  /** Stops a count in flight (app close). */
  close(): void {
    this.#closed.abort();
  }

  #start(): void {
    this.#lastStart = this.#now();
    const signal = AbortSignal.any([this.#closed.signal, AbortSignal.timeout(this.#deadlineMs)]);
    this.#running = this.#count(this.#lastStart, signal)
      .then((count) => {
        this.#last = count;
      })
      .catch((err: unknown) => this.#failed(err))
      .finally(() => {
        this.#running = undefined;
      });
  }

  async #count(startedAt: number, signal: AbortSignal): Promise<PhaseCount> {
    const pass = ++this.#pass;
    let batch: { id: string; m: MachineId; etag: string }[] = [];
    const flush = async (): Promise<void> => {
      const reads = batch;
      batch = [];
      await Promise.all(
        reads.map(async ({ id, m, etag }) => {
          let phase: Phase | null;
          try {
            phase = await this.#source.readPhase(m, etag, { signal });
          } catch (err) {
            // A malformed record is not counted; a store that does not answer fails the count.
            if (!hasCode(err, "INTERNAL")) throw err;
            phase = null;
          }
          this.#known.set(id, { etag, phase: phase && PHASE_SET.has(phase) ? phase : null, pass });
        }),
      );
    };
    for await (const { machine, etag } of this.#source.statusVersions({ signal })) {
      const id = formatMachineId(machine);
      const known = this.#known.get(id);
      if (known && known.etag === etag) {
        known.pass = pass;
        continue;
      }
      batch.push({ id, m: machine, etag });
      if (batch.length >= READ_CONCURRENCY) await flush();
    }
    await flush();
    const counts = Object.fromEntries(PHASES.map((p) => [p, 0])) as Record<Phase, number>;
    for (const [id, known] of this.#known) {
      if (known.pass !== pass) this.#known.delete(id);
      else if (known.phase) counts[known.phase]++;
    }
    return { counts, startedAt };
  }
}
