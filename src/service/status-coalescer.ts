/**
 * Coalesced status reports (docs/api.md "Status durability"). On its way to a terminal phase
 * (succeeded, failed) a machine reports up to four intermediate ones (fetching, decrypted,
 * written, running). An intermediate report whose token checks is held by this replica and
 * answered 202: it is written together with the machine's next terminal report, or when
 * `status.coalesce` has passed, whichever comes first, and on a graceful shutdown. A terminal
 * report is written, with whatever is held for the machine, before its 200. So a boot costs
 * one status write instead of five, and a replica killed with SIGKILL loses at most the
 * intermediate reports of its last window, never one it answered 200.
 *
 * Bounded: at most `maxHeldMachines` machines, HELD_PER_MACHINE reports each and
 * `maxHeldBytes` in all are held; past any bound a report is written through (200).
 */
import { hasCode, isBootsealError } from "../errors.ts";
import { formatMachineId, type MachineId } from "../machine/machine-id.ts";
import type { Seen } from "./records.ts";
import type { StatusEntry, StatusRecord } from "./status-record.ts";
import type { PhaseRecord } from "./status-transitions.ts";
import { digestsEqual } from "./tokens.ts";

export type Report = Omit<StatusEntry, "version">;

/** Reports one machine may have held at once (a fetcher sends four before a terminal one). */
export const HELD_PER_MACHINE = 16;
/** Attempts of a held batch's write before it is dropped (each a window apart). */
const FLUSH_ATTEMPTS = 3;

export interface CoalescerOptions {
  /** How long a report may be held; 0: every report is written before its answer. */
  readonly windowMs: number;
  readonly maxHeldMachines: number;
  readonly maxHeldBytes: number;
  /**
   * One conditional write of the machine's status record (machine-store recordPhase): the
   * batch's first `held` entries are reports this replica held, the rest the report at hand.
   */
  write(m: MachineId, batch: PhaseRecord): Promise<StatusRecord>;
  /** Held reports that could not be written: the token was revoked, or the store stayed down. */
  dropped(m: MachineId, entries: readonly Report[], err: unknown): void;
}

interface Held {
  readonly m: MachineId;
  readonly tokenSha256: string;
  readonly entries: Report[];
  bytes: number;
  attempts: number;
  timer: NodeJS.Timeout;
}

/** What a report costs to hold, roughly: its strings, and a fixed part for the rest. */
function sizeOf(report: Report): number {
  return 256 + (report.message?.length ?? 0) * 3 + (report.output?.length ?? 0) * 3;
}

/** A failure a later write could get past: not a refusal of the token or of the report. */
function worthRetrying(err: unknown): boolean {
  return !isBootsealError(err) || hasCode(err, "STORE_UNAVAILABLE", "PRECONDITION_FAILED");
}

export class StatusCoalescer {
  readonly #options: CoalescerOptions;
  readonly #held = new Map<string, Held>();
  readonly #flushing = new Set<Promise<void>>();
  #bytes = 0;
  #closed = false;

  constructor(options: CoalescerOptions) {
    this.#options = options;
  }

  /** Machines with held reports, and their bytes (metrics, tests). */
  get held(): { readonly machines: number; readonly bytes: number } {
    return { machines: this.#held.size, bytes: this.#bytes };
  }

  /**
   * Holds an intermediate report. False when it must be written through instead (coalescing
   * off, shutting down, or a bound reached): the caller then calls commit().
   */
  hold(m: MachineId, report: Report, tokenSha256: string): boolean {
    const { windowMs, maxHeldMachines, maxHeldBytes } = this.#options;
    if (windowMs <= 0 || this.#closed) return false;
    const key = formatMachineId(m);
    let held = this.#held.get(key);
    // A new token (a republish): what the old one reported goes on its own.
    if (held && !digestsEqual(held.tokenSha256, tokenSha256)) {
      this.#flush(key);
      held = undefined;
    }
    const size = sizeOf(report);
    if (this.#bytes + size > maxHeldBytes) return false;
    if (!held) {
      if (this.#held.size >= maxHeldMachines) return false;
      held = this.#start(key, { m, tokenSha256, entries: [], bytes: 0, attempts: 0 });
    }
    if (held.entries.length >= HELD_PER_MACHINE) return false;
    held.entries.push(report);
    held.bytes += size;
    this.#bytes += size;
    return true;
  }

  /**
   * Writes a report now, with what is held for the machine under the same token, in one
   * write. When that write fails for a reason a later one could get past, the held reports
   * are held again; the report itself fails with the error (its sender retries it).
   * `configDeleted`: the write also records the config and token as gone (a one-time delete
   * after `succeeded`, made just before it).
   */
  async commit(
    m: MachineId,
    report: Report,
    tokenSha256: string,
    seen?: Seen<StatusRecord>,
    configDeleted = false,
  ): Promise<StatusRecord> {
    const key = formatMachineId(m);
    const held = this.#held.get(key);
    const taken = held && digestsEqual(held.tokenSha256, tokenSha256) ? this.#take(key) : undefined;
    const entries = taken ? [...taken.entries, report] : [report];
    try {
      return await this.#options.write(m, {
        entries,
        held: entries.length - 1,
        tokenSha256,
        seen,
        configDeleted,
      });
    } catch (err) {
      if (taken) this.#retryOrDrop(key, taken, err);
      throw err;
    }
  }

  /** Writes everything held (a graceful shutdown); later reports are written through. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const key of [...this.#held.keys()]) this.#flush(key);
    while (this.#flushing.size > 0) await Promise.allSettled([...this.#flushing]);
  }

  #start(key: string, held: Omit<Held, "timer">): Held {
    const timer = setTimeout(() => this.#flush(key), this.#options.windowMs);
    timer.unref();
    const out = Object.assign(held, { timer });
    this.#held.set(key, out);
    return out;
  }

  #take(key: string): Held | undefined {
    const held = this.#held.get(key);
    if (!held) return undefined;
    clearTimeout(held.timer);
    this.#held.delete(key);
    this.#bytes -= held.bytes;
    return held;
  }

  #flush(key: string): void {
    const held = this.#take(key);
    if (!held) return;
    const run = (async () => {
      try {
        const { entries, tokenSha256 } = held;
        await this.#options.write(held.m, { entries, held: entries.length, tokenSha256 });
      } catch (err) {
        this.#retryOrDrop(key, held, err);
      }
    })();
    this.#flushing.add(run);
    void run.finally(() => this.#flushing.delete(run));
  }

  /** Held again for another window (at most FLUSH_ATTEMPTS in all), or dropped. */
  #retryOrDrop(key: string, held: Held, err: unknown): void {
    held.attempts++;
    const newer = this.#held.get(key);
    const again = !this.#closed && held.attempts < FLUSH_ATTEMPTS && worthRetrying(err);
    if (!again || (newer && !digestsEqual(newer.tokenSha256, held.tokenSha256))) {
      this.#options.dropped(held.m, held.entries, err);
      return;
    }
    this.#bytes += held.bytes;
    if (newer) {
      // Reports held meanwhile: one batch again (in the order they were made).
      newer.entries.unshift(...held.entries);
      newer.bytes += held.bytes;
      return;
    }
    this.#start(key, held);
  }
}
