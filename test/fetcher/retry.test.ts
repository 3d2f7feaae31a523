import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { parseFlagDuration as parseDuration } from "../../src/duration.ts";
import { BootsealError } from "../../src/errors.ts";
import { parseRetryAfter, sendOk } from "../../src/http/client.ts";
import { backoffDelay, withRetry } from "../../src/retry.ts";
import { fakeClock } from "../helpers/fake-clock.ts";

test("full jitter: uniform below min(cap, base * 2^(n-1))", () => {
  const policy = { baseMs: 100, capMs: 1000 };
  assert.equal(
    backoffDelay(1, policy, () => 0.999),
    99,
  );
  assert.equal(
    backoffDelay(3, policy, () => 0.5),
    200,
  );
  assert.equal(
    backoffDelay(10, policy, () => 0.999),
    999,
  );
  assert.equal(
    backoffDelay(4, policy, () => 0),
    0,
  );
});

test("durations", () => {
  assert.equal(parseDuration("500ms", "x"), 500);
  assert.equal(parseDuration("30s", "x"), 30_000);
  assert.equal(parseDuration("5m", "x"), 300_000);
  assert.equal(parseDuration("2", "x"), 2000);
  assert.throws(() => parseDuration("soon", "deadline"), { message: /^--deadline: must be a duration/ });
});

test("Retry-After: seconds or an HTTP date", () => {
  assert.equal(parseRetryAfter("3"), 3000);
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:05 GMT", now), 5000);
  assert.equal(parseRetryAfter("garbage"), undefined);
  assert.equal(parseRetryAfter(undefined), undefined);
});

test("retryable failures are retried with backoff, a final one is not", async () => {
  const clock = fakeClock();
  const lines: string[] = [];
  let calls = 0;
  const result = await withRetry(
    async () => {
      calls++;
      if (calls < 3) throw new BootsealError("STORE_UNAVAILABLE", "down");
      return "ok";
    },
    {
      what: "get x",
      deadline: clock.now() + 60_000,
      attemptTimeoutMs: 1000,
      now: clock.now,
      sleep: clock.sleep,
      random: () => 0.5,
      log: (l) => lines.push(l),
    },
  );
  assert.deepEqual(result, { value: "ok", attempts: 3 });
  assert.deepEqual(clock.sleeps, [250, 500]);
  assert.equal(lines.length, 3, "one line per attempt");
  assert.match(lines[0]!, /^attempt 1 get x: STORE_UNAVAILABLE: down; retrying in 0\.25s$/);
  assert.match(lines[2]!, /^attempt 3 get x: ok/);

  calls = 0;
  await assert.rejects(
    withRetry(
      async () => {
        calls++;
        throw new BootsealError("UNAUTHORIZED", "no");
      },
      {
        what: "get y",
        deadline: clock.now() + 60_000,
        attemptTimeoutMs: 1000,
        now: clock.now,
        sleep: clock.sleep,
      },
    ),
    { code: "UNAUTHORIZED", message: "no" },
  );
  assert.equal(calls, 1);
});

test("the deadline ends the retries with the last error's code and a clear message", async () => {
  const clock = fakeClock();
  await assert.rejects(
    withRetry(
      async () => {
        throw new BootsealError("SERVICE_UNAVAILABLE", "GET http://h/x: no answer (ECONNREFUSED)");
      },
      {
        what: "GET http://h/x",
        deadline: clock.now() + 5000,
        attemptTimeoutMs: 1000,
        now: clock.now,
        sleep: clock.sleep,
        random: () => 0.999,
      },
    ),
    (err: BootsealError) => {
      assert.equal(err.code, "SERVICE_UNAVAILABLE");
      assert.match(
        err.message,
        /gave up after \d+ attempts in .* \(the deadline reached\); last error: .*ECONNREFUSED/,
      );
      return true;
    },
  );
});

let server: Server;
let base: string;
let script: Array<{ status: number; headers?: Record<string, string>; body?: string; hang?: boolean }> = [];
const seen: Array<{ auth: string | undefined; at: number }> = [];

before(async () => {
  server = createServer((req, res) => {
    seen.push({ auth: req.headers.authorization, at: Date.now() });
    const step = script.shift() ?? { status: 200, body: "done" };
    if (step.hang) return; // never answers: the per-attempt timeout has to fire
    res.writeHead(step.status, step.headers ?? {});
    res.end(step.body ?? "");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

function get(deadlineMs: number, lines: string[], attemptTimeoutMs = 2000) {
  return withRetry(
    ({ signal }) =>
      sendOk({
        method: "GET",
        url: new URL(`${base}/x`),
        headers: { authorization: "Bearer s3cr3t" },
        signal,
      }),
    {
      what: `GET ${base}/x`,
      deadline: Date.now() + deadlineMs,
      attemptTimeoutMs,
      backoff: { baseMs: 10, capMs: 50 },
      log: (l) => lines.push(l),
    },
  );
}

test("HTTP: 503 and 429 are retried, Retry-After is honoured, then 200", async () => {
  script = [
    { status: 503, body: JSON.stringify({ code: "STORE_UNAVAILABLE", message: "store down" }) },
    {
      status: 429,
      headers: { "retry-after": "1" },
      body: JSON.stringify({ code: "RATE_LIMITED", message: "slow" }),
    },
    { status: 200, body: "payload" },
  ];
  seen.length = 0;
  const lines: string[] = [];
  const { value, attempts } = await get(10_000, lines);
  assert.equal(attempts, 3);
  assert.equal(new TextDecoder().decode(value.body), "payload");
  assert.ok(seen[2]!.at - seen[1]!.at >= 950, "waited for Retry-After: 1");
  assert.equal(seen[0]!.auth, "Bearer s3cr3t");
  assert.ok(!lines.join("\n").includes("s3cr3t"), "the token is never logged");
  assert.match(lines[0]!, /STORE_UNAVAILABLE: GET .*\/x: HTTP 503: store down; retrying/);
});

test("HTTP: a 4xx other than 429 is never retried", async () => {
  for (const status of [400, 401, 403, 404]) {
    script = [{ status, body: JSON.stringify({ code: "TOKEN_EXPIRED", message: "token expired" }) }];
    seen.length = 0;
    await assert.rejects(get(10_000, []), (err: BootsealError) => {
      assert.equal(err.code, "TOKEN_EXPIRED");
      return true;
    });
    assert.equal(seen.length, 1, `HTTP ${status}: one attempt`);
  }
});

test("HTTP: a hanging server hits the per-attempt timeout and is retried", async () => {
  script = [
    { status: 0, hang: true },
    { status: 200, body: "late" },
  ];
  const lines: string[] = [];
  const { attempts } = await get(10_000, lines, 200);
  assert.equal(attempts, 2);
  assert.match(lines[0]!, /no answer within 0\.20s; retrying/);
});

test("HTTP: nobody listening, past the deadline", async () => {
  const dead = createServer();
  await new Promise<void>((r) => dead.listen(0, "127.0.0.1", r));
  const port = (dead.address() as AddressInfo).port;
  await new Promise<void>((r) => dead.close(() => r()));
  const lines: string[] = [];
  const t0 = Date.now();
  await assert.rejects(
    withRetry(({ signal }) => sendOk({ method: "GET", url: new URL(`http://127.0.0.1:${port}/x`), signal }), {
      what: "GET dead",
      deadline: Date.now() + 600,
      attemptTimeoutMs: 200,
      backoff: { baseMs: 20, capMs: 100 },
      log: (l) => lines.push(l),
    }),
    /SERVICE_UNAVAILABLE|gave up after \d+ attempts/,
  );
  assert.ok(Date.now() - t0 < 2000);
  assert.ok(lines.length >= 2);
  assert.match(lines.at(-1)!, /ECONNREFUSED.*giving up/);
});
