/**
 * M1 (issue #10): failed authentications cost the one sending them, not everyone behind the
 * same address. buildApp + inject with trustProxy off, so every request comes from one
 * address (inject's 127.0.0.1) unless a test names another; the limit is the default 20.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import Fastify from "fastify";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { machineStore } from "../../src/service/machine-store.ts";
import { authPlugin, FailureCounter } from "../../src/service/plugins/auth.ts";
import { errorHandlerPlugin } from "../../src/service/plugins/error-handler.ts";
import { checkToken, DEFAULT_TOKEN_WORK, mintToken, type TokenWork } from "../../src/service/tokens.ts";
import { appConfig } from "./app-config.ts";

const recipient = await identityToRecipient(await generateX25519Identity());
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const LIMIT = 20;
/** A well-formed bootstrap token that is nobody's. */
const wrongMachineToken = (ns: string, name: string, i: number) =>
  `bst.${ns}.${name}.${`wrong${i}`.padEnd(43, "A")}`;

async function setup() {
  let now = new Date("2026-01-01T00:00:00Z");
  const config = appConfig({
    creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
    controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
    trustProxy: false,
  });
  assert.equal(config.rateLimit.authFailuresPerMinute, LIMIT, "the default limit");
  const app = buildApp({ logger: false, store: new MemoryStore(), config, now: () => now });
  const publish = async (machine: string) => {
    const res = await app.inject({
      method: "PUT",
      url: `/v1/machines/${machine}/config`,
      headers: { ...bearer(ADMIN), "content-type": "text/plain" },
      payload: "#cloud-config\n",
    });
    assert.equal(res.statusCode, 201, res.body);
    return (res.json() as { bootstrapToken: string }).bootstrapToken;
  };
  const fetchWith = (machine: string, token: string, remoteAddress?: string) =>
    app.inject({
      method: "GET",
      url: `/v1/machines/${machine}/config`,
      headers: bearer(token),
      ...(remoteAddress ? { remoteAddress } : {}),
    });
  return { app, publish, fetchWith, advance: (ms: number) => (now = new Date(now.getTime() + ms)) };
}

test("25 wrong tokens from one address: a valid controller and a valid machine token still pass", async () => {
  const { app, publish, fetchWith } = await setup();
  const token = await publish("prod/worker-0");
  const codes: number[] = [];
  for (let i = 0; i < 25; i++) {
    const wrong = i % 2 ? `wrong-controller-token-${i}` : wrongMachineToken("prod", `m-${i}`, i);
    const url = i % 2 ? "/v1/machines" : `/v1/machines/prod/m-${i}/config`;
    codes.push((await app.inject({ method: "GET", url, headers: bearer(wrong) })).statusCode);
  }
  assert.deepEqual(codes.slice(0, LIMIT), Array(LIMIT).fill(401));
  assert.deepEqual(codes.slice(LIMIT), Array(25 - LIMIT).fill(429), "the address is past its limit");
  const controller = await app.inject({ method: "GET", url: "/v1/machines", headers: bearer(ADMIN) });
  assert.equal(controller.statusCode, 200, controller.body);
  const machine = await fetchWith("prod/worker-0", token);
  assert.equal(machine.statusCode, 200, machine.body);
  const report = await app.inject({
    method: "POST",
    url: "/v1/machines/prod/worker-0/status",
    headers: bearer(token),
    payload: { phase: "running" },
  });
  assert.equal(report.statusCode, 202, report.body); // accepted and held (an intermediate phase)
  await app.close();
});

test("one wrong credential repeated, from many addresses: 429 for it, with Retry-After; others unaffected", async () => {
  const { app } = await setup();
  const codes: number[] = [];
  let last: Awaited<ReturnType<typeof app.inject>> | undefined;
  for (let i = 0; i < 25; i++) {
    last = await app.inject({
      method: "GET",
      url: "/v1/machines",
      headers: bearer("one-stolen-looking-token"),
      remoteAddress: `10.0.0.${i + 1}`,
    });
    codes.push(last.statusCode);
  }
  assert.deepEqual(codes, [...Array(LIMIT).fill(401), ...Array(25 - LIMIT).fill(429)]);
  assert.equal(last?.json().code, "RATE_LIMITED");
  assert.ok(Number(last?.headers["retry-after"]) > 0);
  const other = await app.inject({
    method: "GET",
    url: "/v1/machines",
    headers: bearer("another-wrong-token"),
    remoteAddress: "10.0.0.99",
  });
  assert.equal(other.statusCode, 401, "another credential has its own bucket");
  await app.close();
});

test("wrong tokens naming one machine get 429; that machine's own token still verifies", async () => {
  const { publish, fetchWith, app } = await setup();
  const token = await publish("prod/target");
  const codes: number[] = [];
  for (let i = 0; i < 25; i++) {
    codes.push(
      (await fetchWith("prod/target", wrongMachineToken("prod", "target", i), `10.1.0.${i + 1}`)).statusCode,
    );
  }
  assert.deepEqual(codes, [...Array(LIMIT).fill(401), ...Array(25 - LIMIT).fill(429)]);
  const own = await fetchWith("prod/target", token, "10.1.0.200");
  assert.equal(own.statusCode, 200, "a credential that verifies is never refused");
  const sameAddress = await fetchWith("prod/target", token, "10.1.0.25");
  assert.equal(sameAddress.statusCode, 200);
  await app.close();
});

test("an unauthenticated flood gets 429; valid credentials from the same address still pass", async () => {
  const { app, publish, fetchWith, advance } = await setup();
  const token = await publish("prod/worker-1");
  const codes: number[] = [];
  for (let i = 0; i < 40; i++) {
    const headers = i % 3 === 0 ? { authorization: "Basic Zm9vOmJhcg==" } : {};
    codes.push((await app.inject({ method: "GET", url: "/v1/machines", headers })).statusCode);
  }
  assert.deepEqual(codes, [...Array(LIMIT).fill(401), ...Array(40 - LIMIT).fill(429)]);
  const flood = await app.inject({ method: "GET", url: "/v1/machines/prod/worker-1/config" });
  assert.equal(flood.statusCode, 429);
  assert.equal(flood.json().code, "RATE_LIMITED");
  assert.ok(Number(flood.headers["retry-after"]) > 0);
  assert.equal(
    (await app.inject({ method: "GET", url: "/v1/machines", headers: bearer(ADMIN) })).statusCode,
    200,
  );
  assert.equal((await fetchWith("prod/worker-1", token)).statusCode, 200);
  // The window is one minute: after it, a failure is a plain 401 again.
  advance(61_000);
  assert.equal((await app.inject({ method: "GET", url: "/v1/machines" })).statusCode, 401);
  await app.close();
});

test("the failure buckets are bounded: a flood of distinct credentials cannot grow them", () => {
  let t = 0;
  const counter = new FailureCounter(3, 50, () => t);
  for (let i = 0; i < 5000; i++) counter.fail(`credential:${i}`);
  assert.ok(counter.size <= 50, `size ${counter.size}`);
  // A bucket still counts once it is back: 3 allowed, the 4th is over.
  assert.deepEqual(
    [1, 2, 3, 4].map(() => counter.fail("address:a")),
    [0, 0, 0, 60],
  );
  assert.equal(counter.blocked("address:a"), 60);
  t += 60_000;
  assert.equal(counter.blocked("address:a"), 0, "the window is over");
});

test("the bucket of an address that keeps failing survives a flood of distinct credentials", () => {
  const counter = new FailureCounter(5, 10, () => 0);
  const answers: number[] = [];
  for (let i = 0; i < 1000; i++) {
    answers.push(counter.fail("address:attacker"));
    counter.fail(`credential:${i}`);
  }
  assert.ok(counter.size <= 10);
  assert.deepEqual(answers.slice(0, 5), [0, 0, 0, 0, 0]);
  assert.ok(
    answers.slice(5).every((w) => w > 0),
    "still limited: its bucket was never evicted",
  );
});

/** Token work that counts its calls (L5: the failing paths must do the same work). */
function countingWork() {
  const calls = { hash: 0, equal: 0 };
  const work: TokenWork = {
    hash: (t) => {
      calls.hash++;
      return DEFAULT_TOKEN_WORK.hash(t);
    },
    equal: (a, b) => {
      calls.equal++;
      return DEFAULT_TOKEN_WORK.equal(a, b);
    },
  };
  return { calls, work };
}

test("L5: checkToken hashes and compares once on every path, a missing record included", () => {
  const now = new Date("2026-01-01T00:00:00Z");
  const m = { namespace: "prod", name: "worker-0" };
  const { token, record } = mintToken(m, 60_000, 1, now);
  const other = mintToken({ namespace: "prod", name: "worker-1" }, 60_000, 1, now);
  const { calls, work } = countingWork();
  const cases: [string, () => unknown][] = [
    ["valid", () => checkToken(record, token, m, now, work)],
    ["no record", () => checkToken(null, token, m, now, work)],
    ["wrong token", () => checkToken(record, other.token, m, now, work)],
    ["another machine's record", () => checkToken(other.record, token, m, now, work)],
    ["expired", () => checkToken(record, token, m, new Date(now.getTime() + 120_000), work)],
  ];
  for (const [name, run] of cases) {
    calls.hash = 0;
    calls.equal = 0;
    try {
      run();
    } catch {
      // the failures are the point
    }
    assert.deepEqual(calls, { hash: 1, equal: 1 }, name);
  }
});

test("L5: through the auth plugin, a machine without a token record costs what a wrong token does", async () => {
  const store = new MemoryStore();
  const machines = machineStore(store);
  const now = new Date("2026-01-01T00:00:00Z");
  const known = { namespace: "prod", name: "known" };
  await machines.writeToken(known, mintToken(known, 60_000, 5, now).record);
  const { calls, work } = countingWork();
  const app = Fastify();
  errorHandlerPlugin(app);
  app.decorateRequest("bootsealState", null);
  await app.register(async (api) => {
    authPlugin(api, {
      controllers: [],
      mutualTls: false,
      authFailuresPerMinute: 1000,
      machines,
      now: () => now,
      tokenWork: work,
    });
    api.get("/v1/machines/:ns/:name/thing", { config: { auth: { machine: "params" } } }, async () => ({}));
  });
  const spent = async (machine: string) => {
    calls.hash = 0;
    calls.equal = 0;
    const [ns, name] = machine.split("/") as [string, string];
    const res = await app.inject({
      url: `/v1/machines/${machine}/thing`,
      headers: bearer(wrongMachineToken(ns, name, 1)),
    });
    assert.equal(res.statusCode, 401);
    return { ...calls };
  };
  const withRecord = await spent("prod/known");
  const without = await spent("prod/unknown");
  assert.deepEqual(without, withRecord);
  assert.ok(withRecord.equal >= 1 && withRecord.hash >= 1);
  await app.close();
});
