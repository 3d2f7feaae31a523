/**
 * The work queue (client-go's workqueue, in small): keys (`ns/name`) are deduplicated while
 * they wait, one key is never worked on by two workers at once (a key added while it is being
 * worked on runs again after), failures are requeued with per-key full-jitter exponential
 * backoff (src/retry.ts) that resets on success, and `addAfter` delays a key (polling,
 * Retry-After). `concurrency` workers drain it.
 */
import { type BackoffPolicy, backoffDelay } from "../retry.ts";

export interface QueueOptions {
  readonly concurrency: number;
  readonly backoff: BackoffPolicy;
  readonly random?: () => number;
}

export type Worker = (key: string) => Promise<void>;

export class WorkQueue {
  readonly #opts: QueueOptions;
  readonly #waiting = new Set<string>();
  readonly #order: string[] = [];
  readonly #running = new Set<string>();
  /** Keys added while they were running: they go back in line when the run ends. */
  readonly #dirty = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  #worker: Worker | undefined;
  #active = 0;
  #stopped = false;
  #idle: (() => void)[] = [];

  constructor(opts: QueueOptions) {
    this.#opts = opts;
  }

  get length(): number {
    return this.#waiting.size;
  }

  /** Starts the workers; `worker` throws to ask for a backoff requeue. */
  start(worker: Worker): void {
    this.#worker = worker;
    this.#pump();
  }

  add(key: string): void {
    if (this.#stopped) return;
    if (this.#running.has(key)) {
      this.#dirty.add(key);
      return;
    }
    if (this.#waiting.has(key)) return;
    this.#waiting.add(key);
    this.#order.push(key);
    this.#pump();
  }

  /** Adds the key after `ms`; an earlier pending time wins over a later one. */
  addAfter(key: string, ms: number): void {
    if (this.#stopped) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + ms;
    const old = this.#timers.get(key);
    if (old && old.at <= at) return;
    if (old) clearTimeout(old.timer);
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.#timers.set(key, { at, timer });
  }

  /** A failure: the key comes back after its backoff (or `atLeastMs`, a Retry-After). */
  addRateLimited(key: string, atLeastMs = 0): number {
    const n = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, n);
    const ms = Math.max(atLeastMs, backoffDelay(n, this.#opts.backoff, this.#opts.random));
    this.addAfter(key, Math.max(1, ms));
    return ms;
  }

  /** Success: the key's backoff starts over. */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  failures(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  /** Stops taking work and waits for the runs under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    this.#waiting.clear();
    this.#order.length = 0;
    if (this.#active === 0) return;
    await new Promise<void>((resolve) => this.#idle.push(resolve));
  }

  #pump(): void {
    const worker = this.#worker;
    if (!worker) return;
    while (!this.#stopped && this.#active < this.#opts.concurrency && this.#order.length > 0) {
      const key = this.#order.shift() as string;
      this.#waiting.delete(key);
      this.#running.add(key);
      this.#active++;
      void this.#run(worker, key);
    }
  }

  async #run(worker: Worker, key: string): Promise<void> {
    try {
      await worker(key);
    } catch {
      // The worker reports its own failures (and requeues); a throw is a bug it already logged.
    } finally {
      this.#running.delete(key);
      this.#active--;
      if (this.#dirty.delete(key)) this.add(key);
      if (this.#active === 0 && this.#stopped) for (const f of this.#idle.splice(0)) f();
      this.#pump();
    }
  }
}
