import assert from "node:assert/strict";
import { test } from "node:test";
import { createMemoryStore } from "../providers/stores/memory.ts";
import { retryingStore } from "../providers/stores/retrying.ts";
import { BootsealError } from "../src/errors.ts";
import { DEFAULT_RETRY, retryCall, retryPolicy, withRetry } from "../src/retry.ts";
import { fakeClock } from "./helpers/fake-clock.ts";

const down = () => new BootsealError("KEY_UNAVAILABLE", "kms: key k: connection refused");

test("attempts without a deadline: the limit ends the loop, the message says so", async () => {
  const clock = fakeClock();
  let calls = 0;
  await assert.rejects(
    withRetry(
      async () => {
        calls++;
        throw down();
      },
      { what: "decrypt", maxAttempts: 3, now: clock.now, sleep: clock.sleep, random: () => 1 },
    ),
    (err: BootsealError) => {
      assert.equal(err.code, "KEY_UNAVAILABLE");
      assert.match(
        err.message,
        /^decrypt: gave up after 3 attempts in .* \(the attempt limit reached\); last error: kms: key k/,
      );
      return true;
    },
  );
  assert.equal(calls, 3);
  assert.deepEqual(clock.sleeps, [500, 1000], "full jitter ceilings double from the default base");
});

test("rethrowLast keeps the last failure as it is", async () => {
  const clock = fakeClock();
  const last = down();
  await assert.rejects(
    withRetry(
      async ({ attempt }) => {
        throw attempt === 2 ? last : down();
      },
      { what: "x", maxAttempts: 2, rethrowLast: true, now: clock.now, sleep: clock.sleep },
    ),
    (err) => err === last,
  );
});

test("a classifier decides: here only lost compare-and-swap races are retried", async () => {
  const clock = fakeClock();
  const lostRace = () => new BootsealError("PRECONDITION_FAILED", "etag changed");
  const classify = (err: unknown) => ({
    retry: err instanceof BootsealError && err.code === "PRECONDITION_FAILED",
  });
  let calls = 0;
  const { value, attempts } = await withRetry(
    async () => {
      if (++calls < 3) throw lostRace();
      return "written";
    },
    { what: "update", maxAttempts: 8, classify, now: clock.now, sleep: clock.sleep },
  );
  assert.equal(value, "written");
  assert.equal(attempts, 3);
  // A retryable code the classifier does not want is final at once.
  calls = 0;
  await assert.rejects(
    withRetry(
      async () => {
        calls++;
        throw new BootsealError("STORE_UNAVAILABLE", "down");
      },
      { what: "update", maxAttempts: 8, classify, now: clock.now, sleep: clock.sleep },
    ),
    { code: "STORE_UNAVAILABLE" },
  );
  assert.equal(calls, 1);
});

test("the per-attempt timeout aborts the attempt's signal; timeoutCode names the failure", async () => {
  const lines: string[] = [];
  let calls = 0;
  await assert.rejects(
    withRetry(
      ({ signal }) => {
        calls++;
        // A call that only ends when aborted, failing with something that is not ours.
        return new Promise((_, reject) =>
          signal.addEventListener("abort", () => reject(new Error("aborted"))),
        );
      },
      {
        what: "kms: decrypt with k",
        maxAttempts: 2,
        attemptTimeoutMs: 30,
        timeoutCode: "KEY_UNAVAILABLE",
        backoff: { baseMs: 1, capMs: 1 },
        rethrowLast: true,
        log: (l) => lines.push(l),
      },
    ),
    { code: "KEY_UNAVAILABLE", message: "kms: decrypt with k: no answer within 0.03s" },
  );
  assert.equal(calls, 2);
  assert.equal(lines.length, 2, "one line per attempt");
  assert.match(
    lines[1] ?? "",
    /^attempt 2 kms: decrypt with k: KEY_UNAVAILABLE: .*no answer within 0\.03s \(giving up\)$/,
  );
});

test("the caller's abort stops the loop, also while it sleeps", async () => {
  const controller = new AbortController();
  let calls = 0;
  const run = withRetry(
    async () => {
      calls++;
      setTimeout(() => controller.abort(new Error("shutting down")), 10);
      throw down();
    },
    {
      what: "x",
      maxAttempts: 5,
      backoff: { baseMs: 10_000, capMs: 10_000 },
      random: () => 1,
      signal: controller.signal,
    },
  );
  await assert.rejects(run, /shutting down|aborted/);
  assert.equal(calls, 1);
  await assert.rejects(
    withRetry(async () => "never", { what: "x", signal: AbortSignal.abort(new Error("already")) }),
    /already/,
  );
});

test("retryCall: a RetryPolicy's attempts, backoff and timeout; checked policies", async () => {
  let calls = 0;
  const value = await retryCall(
    { ...DEFAULT_RETRY, baseDelayMs: 1, maxDelayMs: 2 },
    "kms: encrypt with k",
    "KEY_UNAVAILABLE",
    undefined,
    async (signal) => {
      assert.ok(signal instanceof AbortSignal);
      if (++calls < 3) throw down();
      return 42;
    },
  );
  assert.equal(value, 42);
  assert.equal(calls, 3);
  calls = 0;
  await assert.rejects(
    retryCall(retryPolicy({ attempts: 1 }), "x", "KEY_UNAVAILABLE", undefined, async () => {
      calls++;
      throw down();
    }),
    { code: "KEY_UNAVAILABLE", message: "kms: key k: connection refused" },
  );
  assert.equal(calls, 1);
  assert.throws(() => retryPolicy({ attempts: 0 }), { code: "USAGE" });
  assert.throws(() => retryPolicy({ timeoutMs: 0 }), { code: "USAGE" });
});

test("the log lines carry the operation and the failure, never more", async () => {
  const clock = fakeClock();
  const lines: string[] = [];
  await withRetry(
    async ({ attempt }) => {
      if (attempt === 1) throw new BootsealError("RATE_LIMITED", "slow down");
      return "ok";
    },
    {
      what: "GET https://svc/v1/x",
      deadline: clock.now() + 10_000,
      now: clock.now,
      sleep: clock.sleep,
      log: (l) => lines.push(l),
      random: () => 0,
    },
  );
  assert.equal(lines[0], "attempt 1 GET https://svc/v1/x: RATE_LIMITED: slow down; retrying in 0.00s");
  assert.match(lines[1] ?? "", /^attempt 2 GET https:\/\/svc\/v1\/x: ok in /);
});

test("retryingStore: unavailable store calls get more attempts, lost races and refusals none", async () => {
  const inner = createMemoryStore("retrying");
  const failures: string[] = [];
  let failNext = 0;
  // The memory store with a fault injector in front: the next `failNext` calls are unavailable.
  const flaky = new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (failNext > 0) {
          failNext--;
          failures.push(String(prop));
          const err = new BootsealError("STORE_UNAVAILABLE", "S3 is unavailable (503)");
          if (prop === "list") {
            return (async function* () {
              yield* [];
              throw err;
            })();
          }
          return Promise.reject(err);
        }
        return value.apply(target, args);
      };
    },
  });
  const store = retryingStore(flaky, { attempts: 3, baseDelayMs: 1, maxDelayMs: 2 });
  failNext = 2;
  await store.put("a", new TextEncoder().encode("1"), { ifNoneMatch: "*" });
  assert.deepEqual(failures, ["put", "put"]);
  failNext = 2;
  assert.equal(new TextDecoder().decode((await store.get("a"))?.body), "1");
  failNext = 1;
  const listed: string[] = [];
  for await (const info of store.list("")) listed.push(info.key);
  assert.deepEqual(listed, ["a"]);
  failNext = 3;
  await assert.rejects(store.head("a"), { code: "STORE_UNAVAILABLE", message: "S3 is unavailable (503)" });
  // A lost race is final: one call, the store's own error.
  failures.length = 0;
  await assert.rejects(store.put("a", new TextEncoder().encode("2"), { ifNoneMatch: "*" }), {
    code: "PRECONDITION_FAILED",
  });
  assert.equal(retryingStore(inner, { attempts: 1 }), inner, "one attempt: the store itself");
});
