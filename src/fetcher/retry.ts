/**
 * Retries for the machine side: exponential backoff with full jitter (the AWS Architecture
 * Blog's "full jitter": sleep = random(0, min(cap, base * 2^n))), a per-attempt timeout and
 * one overall deadline. Which failures are worth another attempt is the caller's to say
 * (`classify`); the default retries a BootsealError whose code is retryable and honours a
 * `retryAfterMs` it carries (HTTP Retry-After). Every attempt is logged on one line; the
 * line names the operation (never a token) and the failure's safe message.
 */
import { setTimeout as delay } from "node:timers/promises";
import { BootsealError, isBootsealError } from "../errors.ts";

export interface BackoffPolicy {
  /** First backoff ceiling, ms (default 500). */
  readonly baseMs: number;
  /** Largest backoff ceiling, ms (default 30 s). */
  readonly capMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 500, capMs: 30_000 };

/** Full jitter: a uniform draw from [0, min(cap, base * 2^(attempt-1))]; attempt counts from 1. */
export function backoffDelay(
  attempt: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.capMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.floor(random() * ceiling);
}

export interface RetryVerdict {
  readonly retry: boolean;
  /** The peer asked for at least this long (Retry-After). */
  readonly afterMs?: number;
}

export type Classifier = (err: unknown) => RetryVerdict;

export const defaultClassify: Classifier = (err) => {
  if (!isBootsealError(err) || !err.retryable) return { retry: false };
  const after = (err as { retryAfterMs?: unknown }).retryAfterMs;
  return typeof after === "number" && after >= 0 ? { retry: true, afterMs: after } : { retry: true };
};

export interface AttemptContext {
  /** 1-based. */
  readonly attempt: number;
  /** Aborts at the per-attempt timeout, the deadline, or the caller's signal. */
  readonly signal: AbortSignal;
}

export interface RetryOptions {
  /** What is being tried, for the log line ("GET https://host/v1/machines/ns/n/config"). */
  readonly what: string;
  /** Absolute deadline, in the clock's milliseconds. */
  readonly deadline: number;
  readonly attemptTimeoutMs: number;
  readonly backoff?: BackoffPolicy;
  readonly maxAttempts?: number;
  readonly classify?: Classifier;
  readonly log?: (line: string) => void;
  readonly signal?: AbortSignal;
  /** Injectable for tests. */
  readonly now?: () => number;
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly random?: () => number;
}

export interface RetryResult<T> {
  readonly value: T;
  readonly attempts: number;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 0)}s`;
}

function describe(err: unknown): string {
  if (isBootsealError(err)) return `${err.code}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

const realSleep = async (ms: number, signal?: AbortSignal): Promise<void> => {
  await delay(ms, undefined, signal ? { signal } : {});
};

/**
 * Runs `fn` until it succeeds, a failure is final, the attempts run out or the deadline
 * passes. A final failure is rethrown as is; running out of time or attempts throws the
 * last failure's code with a message saying how many attempts were made over how long.
 */
export async function withRetry<T>(
  fn: (ctx: AttemptContext) => Promise<T>,
  options: RetryOptions,
): Promise<RetryResult<T>> {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? realSleep;
  const classify = options.classify ?? defaultClassify;
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  const log = options.log ?? (() => {});
  const started = now();
  for (let attempt = 1; ; attempt++) {
    options.signal?.throwIfAborted();
    const remaining = options.deadline - now();
    const timeoutMs = Math.max(1, Math.min(options.attemptTimeoutMs, remaining));
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const t0 = now();
    let failure: unknown;
    try {
      const value = await fn({ attempt, signal });
      log(`attempt ${attempt} ${options.what}: ok in ${seconds(now() - t0)}`);
      return { value, attempts: attempt };
    } catch (err) {
      failure =
        timeout.aborted && !options.signal?.aborted
          ? new BootsealError(
              isBootsealError(err) && err.retryable ? err.code : "SERVICE_UNAVAILABLE",
              `no answer within ${seconds(timeoutMs)}`,
              { cause: err },
            )
          : err;
    }
    if (options.signal?.aborted) throw failure;
    const verdict = classify(failure);
    if (!verdict.retry) {
      log(`attempt ${attempt} ${options.what}: ${describe(failure)} (not retried)`);
      throw failure;
    }
    const wait = Math.max(backoffDelay(attempt, backoff, options.random), verdict.afterMs ?? 0);
    const outOfTime = now() + wait >= options.deadline;
    const outOfAttempts = options.maxAttempts !== undefined && attempt >= options.maxAttempts;
    if (outOfTime || outOfAttempts) {
      log(`attempt ${attempt} ${options.what}: ${describe(failure)} (giving up)`);
      const why = outOfTime ? "the deadline" : "the attempt limit";
      const code = isBootsealError(failure) ? failure.code : "SERVICE_UNAVAILABLE";
      const last = isBootsealError(failure) ? failure.message : describe(failure);
      throw new BootsealError(
        code,
        `${options.what}: gave up after ${attempt} attempt${attempt === 1 ? "" : "s"} in ${seconds(now() - started)} (${why} reached); last error: ${last}`,
        { cause: failure },
      );
    }
    log(`attempt ${attempt} ${options.what}: ${describe(failure)}; retrying in ${seconds(wait)}`);
    await sleep(wait, options.signal);
  }
}

/** Durations as flags take them: "500ms", "30s", "5m", "1h", or a bare number of seconds. */
export function parseDuration(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!m) throw new BootsealError("USAGE", `--${flag} wants a duration such as 30s, 5m or 1h, got "${text}"`);
  const n = Number(m[1]);
  const unit = m[2] ?? "s";
  const factor = unit === "ms" ? 1 : unit === "s" ? 1000 : unit === "m" ? 60_000 : 3_600_000;
  return Math.round(n * factor);
}
