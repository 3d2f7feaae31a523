/**
 * Bounded retries with exponential backoff and full jitter, shared by the cloud master keys.
 *
 * Only failures a provider has already mapped to a retryable BootsealError (KEY_UNAVAILABLE:
 * throttling, 5xx, connection refused or timed out) are retried; a refusal, an unknown key
 * or a bad ciphertext fails at once. The SDKs' own retry loops are switched off by each
 * provider so that this is the only one and the bound is ours: with the defaults an
 * unreachable service costs three attempts and well under a second of sleeping.
 */
import { BootsealError, isBootsealError } from "../../src/errors.ts";

export interface RetryPolicy {
  /** Total attempts, first one included (1 = no retry). */
  readonly attempts: number;
  /** Upper bound of the first backoff; doubles per attempt. */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  /** Per-attempt deadline for one request (connect + answer). */
  readonly timeoutMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  attempts: 3,
  baseDelayMs: 100,
  maxDelayMs: 1_000,
  timeoutMs: 5_000,
};

/** A policy from `extras.<kind>.retry`, partial fields over the defaults, checked. */
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

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Runs `attempt` until it succeeds, throws something not retryable, or the attempts are
 * used up. `attempt` must throw BootsealErrors (the provider's mapping); anything else is
 * rethrown unchanged. An abort from the caller stops the loop with the abort reason.
 */
export async function withRetry<T>(
  policy: RetryPolicy,
  signal: AbortSignal | undefined,
  attempt: (n: number) => Promise<T>,
): Promise<T> {
  for (let n = 1; ; n++) {
    signal?.throwIfAborted();
    try {
      return await attempt(n);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (!isBootsealError(err) || !err.retryable || n >= policy.attempts) throw err;
      const cap = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (n - 1));
      await sleep(Math.random() * cap, signal);
    }
  }
}

/** The caller's signal combined with the per-attempt deadline. */
export function attemptSignal(policy: RetryPolicy, signal: AbortSignal | undefined): AbortSignal {
  const timeout = AbortSignal.timeout(policy.timeoutMs);
  return signal ? AbortSignal.any([signal, timeout]) : timeout;
}

/** created_at as sops writes it: RFC 3339, UTC, second precision. */
export function formatCreatedAt(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** Optional created_at of an entry: absent in keys built from flags or .sops.yaml; must parse when there. */
export function checkCreatedAt(value: unknown, label: string): void {
  if (value === undefined) return;
  if (typeof value !== "string" || Number.isNaN(Date.parse(value))) {
    throw new BootsealError("BAD_INPUT", `${label}: created_at is not a time`);
  }
}

/** A string field of a metadata entry, or "" when absent. */
export function stringField(fields: ReadonlyMap<string, unknown>, name: string, label: string): string {
  const value = fields.get(name);
  if (value === undefined) return "";
  if (typeof value !== "string") throw new BootsealError("BAD_INPUT", `${label}: ${name} is not a string`);
  return value;
}

/** Standard base64 as Go's StdEncoding accepts it (padding required, no whitespace). */
export function decodeStdBase64(enc: string, label: string): Uint8Array {
  if (enc === "" || enc.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(enc)) {
    throw new BootsealError("BAD_INPUT", `${label}: enc is not standard base64`);
  }
  return new Uint8Array(Buffer.from(enc, "base64"));
}
