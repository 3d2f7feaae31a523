/**
 * The one retry loop: the fetcher's downloads and reports, the key providers' calls, the
 * object stores' calls and the service's compare-and-swap updates all go through withRetry,
 * and the SDKs' own retry loops are switched off (AWS `maxAttempts: 1`, GCS `autoRetry: false`,
 * Azure `maxRetries: 0`, gax `maxRetries: 0`), so retries never nest and every bound is ours.
 *
 * - Backoff: exponential with full jitter (the AWS Architecture Blog's "full jitter":
 *   sleep = random(0, min(cap, base * 2^(n-1)))), never shorter than a `Retry-After` the
 *   failure carries (`retryAfterMs`).
 * - Bounds: an overall deadline and/or a number of attempts; an optional per-attempt timeout
 *   that aborts the attempt's AbortSignal; the caller's signal stops everything.
 * - What is worth another attempt is the classifier's to say; the default retries a
 *   BootsealError whose code is retryable (KEY_UNAVAILABLE, STORE_UNAVAILABLE, ...).
 * - One log line per attempt through the injected `log`; the line names the operation (never
 *   a token: callers pass a method and a URL without query or credentials) and the failure's
 *   code and message, which BootsealErrors keep free of secrets.
 */
import { setTimeout as delay } from "node:timers/promises";
import { BootsealError, type ErrorCode, isBootsealError } from "./errors.ts";

export interface BackoffPolicy {
  /** First backoff ceiling, ms. */
  readonly baseMs: number;
  /** Largest backoff ceiling, ms. */
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
  /** What is being tried, for the log line and the give-up message ("GET https://host/v1/..."). */
  readonly what: string;
  /** Absolute deadline, in the clock's milliseconds; none when absent (then bound maxAttempts). */
  readonly deadline?: number;
  /** Per-attempt timeout, ms; none when absent (the deadline still cuts an attempt short). */
  readonly attemptTimeoutMs?: number;
  /** The code of a timed-out attempt whose own failure was not retryable (default SERVICE_UNAVAILABLE). */
  readonly timeoutCode?: ErrorCode;
  readonly backoff?: BackoffPolicy;
  /** Total attempts, the first one included. */
  readonly maxAttempts?: number;
  readonly classify?: Classifier;
  /**
   * When the attempts or the time run out, throw the last failure as it is instead of a
   * "gave up after N attempts" error with its code (callers whose callers match on messages).
   */
  readonly rethrowLast?: boolean;
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

/** The attempt's signal: the caller's, the per-attempt timeout and the deadline, whichever first. */
function attemptSignal(options: RetryOptions, now: number): { signal: AbortSignal; timeoutMs?: number } {
  const remaining = options.deadline === undefined ? undefined : options.deadline - now;
  const limits = [options.attemptTimeoutMs, remaining].filter((v): v is number => v !== undefined);
  if (limits.length === 0) return { signal: options.signal ?? new AbortController().signal };
  const timeoutMs = Math.max(1, Math.min(...limits));
  const timeout = AbortSignal.timeout(timeoutMs);
  return { signal: options.signal ? AbortSignal.any([options.signal, timeout]) : timeout, timeoutMs };
}

/**
 * Runs `fn` until it succeeds, a failure is final, the attempts run out or the deadline
 * passes. A final failure is rethrown as is; running out of time or attempts throws the
 * last failure's code with a message saying how many attempts were made over how long
 * (or the last failure itself with `rethrowLast`).
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
    const t0 = now();
    const { signal, timeoutMs } = attemptSignal(options, t0);
    let failure: unknown;
    try {
      const value = await fn({ attempt, signal });
      log(`attempt ${attempt} ${options.what}: ok in ${seconds(now() - t0)}`);
      return { value, attempts: attempt };
    } catch (err) {
      failure =
        timeoutMs !== undefined && signal.aborted && !options.signal?.aborted
          ? new BootsealError(
              isBootsealError(err) && err.retryable
                ? err.code
                : (options.timeoutCode ?? "SERVICE_UNAVAILABLE"),
              // With rethrowLast this message is the caller's error, so it names the operation.
              `${options.rethrowLast ? `${options.what}: ` : ""}no answer within ${seconds(timeoutMs)}`,
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
    const outOfTime = options.deadline !== undefined && now() + wait >= options.deadline;
    const outOfAttempts = options.maxAttempts !== undefined && attempt >= options.maxAttempts;
    if (outOfTime || outOfAttempts) {
      log(`attempt ${attempt} ${options.what}: ${describe(failure)} (giving up)`);
      if (options.rethrowLast) throw failure;
      const why = outOfTime ? "the deadline" : "the attempt limit";
      const code = isBootsealError(failure) ? failure.code : (options.timeoutCode ?? "SERVICE_UNAVAILABLE");
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

/**
 * A bounded policy as the key providers and stores are configured with (`retry: {attempts}`):
 * a few quick attempts, each with its own timeout, and no deadline of its own.
 */
export interface RetryPolicy {
  /** Total attempts, first one included (1 = no retry). */
  readonly attempts: number;
  /** Upper bound of the first backoff; doubles per attempt. */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  /** Per-attempt deadline for one request (connect + answer). */
  readonly timeoutMs: number;
}

/** With these an unreachable service costs three attempts and well under a second of sleeping. */
export const DEFAULT_RETRY: RetryPolicy = {
  attempts: 3,
  baseDelayMs: 100,
  maxDelayMs: 1_000,
  timeoutMs: 5_000,
};

/** A policy from partial fields over the defaults, checked. */
export function retryPolicy(partial: Partial<RetryPolicy> | undefined): RetryPolicy {
  const p = { ...DEFAULT_RETRY, ...partial };
  if (!Number.isInteger(p.attempts) || p.attempts < 1 || p.attempts > 10) {
    throw new BootsealError("USAGE", "retry attempts must be 1..10");
  }
  if (!(p.timeoutMs > 0) || p.baseDelayMs < 0 || p.maxDelayMs < 0) {
    throw new BootsealError("USAGE", "retry delays and timeout must be positive");
  }
  return p;
}

/**
 * withRetry under a RetryPolicy, for calls whose failures are already mapped to BootsealErrors
 * (`timeoutCode` is the code a timed-out attempt gets, e.g. KEY_UNAVAILABLE); returns the value.
 */
export async function retryCall<T>(
  policy: RetryPolicy,
  what: string,
  timeoutCode: ErrorCode,
  signal: AbortSignal | undefined,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const { value } = await withRetry((ctx) => fn(ctx.signal), {
    what,
    maxAttempts: policy.attempts,
    attemptTimeoutMs: policy.timeoutMs,
    timeoutCode,
    backoff: { baseMs: policy.baseDelayMs, capMs: policy.maxDelayMs },
    // The providers' messages already name the key or object; a wrapper would say it twice.
    rethrowLast: true,
    signal,
  });
  return value;
}
