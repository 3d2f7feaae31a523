/**
 * The auth plugin on its own: routes declare `config.auth` and the plugin attaches every
 * check (authentication, the machine's token against the store, failure counting), so the
 * handlers below do nothing but record that they ran.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import Fastify, { type FastifyInstance } from "fastify";
import { MemoryStore } from "../../providers/stores/memory.ts";
import type { ObjectStore } from "../../providers/stores/object-store.ts";
import { BootsealError } from "../../src/errors.ts";
import { machineStore } from "../../src/service/machine-store.ts";
import { authPlugin } from "../../src/service/plugins/auth.ts";
import { errorHandlerPlugin } from "../../src/service/plugins/error-handler.ts";
import { machineTokenOf } from "../../src/service/request-state.ts";
import { mintToken } from "../../src/service/tokens.ts";

const READER = "controller-reader-token-0123456789abcdefghijk";
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const m = { namespace: "prod", name: "worker-0" };

async function setup(options: { failuresPerMinute?: number } = {}) {
  const memory = new MemoryStore();
  const tokenReads: string[] = [];
  // Counts token reads, to show which refusals never touch the store.
  const store: ObjectStore = {
    url: memory.url,
    get: (key, o) => {
      if (key.startsWith("tokens/")) tokenReads.push(key);
      return memory.get(key, o);
    },
    head: (key, o) => memory.head(key, o),
    put: (key, body, condition, o) => memory.put(key, body, condition, o),
    delete: (key, condition, o) => memory.delete(key, condition, o),
    list: (prefix, o) => memory.list(prefix, o),
  };
  const machines = machineStore(store);
  let now = new Date("2026-01-01T00:00:00Z");
  const { token, record } = mintToken(m, 3_600_000, 5, now);
  await machines.writeToken(m, record);
  const ran: string[] = [];
  const app: FastifyInstance = Fastify();
  errorHandlerPlugin(app);
  app.decorateRequest("bootsealState", null);
  await app.register(async (api) => {
    authPlugin(api, {
      controllers: [
        { name: "reader", tokenSha256: sha(READER), scopes: ["status:read"] },
        { name: "admin", tokenSha256: sha(ADMIN), scopes: ["admin"] },
      ],
      mutualTls: false,
      authFailuresPerMinute: options.failuresPerMinute ?? 100,
      machines,
      now: () => now,
    });
    api.get("/open", async () => {
      ran.push("open");
      return {};
    });
    api.get(
      "/v1/machines/:ns/:name/thing",
      { config: { auth: { scopes: ["status:read"], machine: "params" } } },
      async (request) => {
        ran.push("thing");
        return { token: machineTokenOf(request)?.sha256 ?? null };
      },
    );
    api.get("/v1/machines/:ns/:name/write", { config: { auth: { scopes: ["configs:write"] } } }, async () => {
      ran.push("write");
      return {};
    });
    api.get("/v1/machines/:ns/:name/machine-only", { config: { auth: { machine: "params" } } }, async () => {
      ran.push("machine-only");
      throw new BootsealError("TOKEN_EXHAUSTED", "the bootstrap token has no fetches left");
    });
  });
  return {
    app,
    token,
    record,
    ran,
    tokenReads,
    later: (ms: number) => {
      now = new Date(now.getTime() + ms);
    },
  };
}

test("a route without config.auth is open; one with it refuses a missing credential before its handler", async () => {
  const { app, ran } = await setup();
  assert.equal((await app.inject({ url: "/open" })).statusCode, 200);
  const res = await app.inject({ url: "/v1/machines/prod/worker-0/thing" });
  assert.equal(res.statusCode, 401);
  assert.equal(res.json().code, "UNAUTHORIZED");
  assert.deepEqual(ran, ["open"]);
});

test("machine: params: the machine's own token is checked against the store and handed to the handler", async () => {
  const { app, token, record, ran, tokenReads } = await setup();
  const res = await app.inject({ url: "/v1/machines/prod/worker-0/thing", headers: bearer(token) });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { token: record.sha256 });
  assert.deepEqual(tokenReads, ["tokens/prod/worker-0.json"]);
  assert.deepEqual(ran, ["thing"]);
});

test("another machine's route: 403 without reading the store; a controller-only route: 403", async () => {
  const { app, token, ran, tokenReads } = await setup();
  const other = await app.inject({ url: "/v1/machines/prod/worker-1/thing", headers: bearer(token) });
  assert.equal(other.statusCode, 403);
  assert.match(other.json().message, /belongs to another machine/);
  const write = await app.inject({ url: "/v1/machines/prod/worker-0/write", headers: bearer(token) });
  assert.equal(write.statusCode, 403);
  assert.match(write.json().message, /bootstrap token cannot call this route/);
  assert.deepEqual(tokenReads, []);
  assert.deepEqual(ran, []);
});

test("an expired token is refused by the hook (401 TOKEN_EXPIRED); the handler never runs", async () => {
  const { app, token, ran, later } = await setup();
  later(3_600_000);
  const res = await app.inject({ url: "/v1/machines/prod/worker-0/thing", headers: bearer(token) });
  assert.equal(res.statusCode, 401);
  assert.equal(res.json().code, "TOKEN_EXPIRED");
  assert.deepEqual(ran, []);
});

test("controllers: every declared scope is needed, admin implies them; no scopes means machines only", async () => {
  const { app, ran } = await setup();
  const reader = await app.inject({ url: "/v1/machines/prod/worker-0/write", headers: bearer(READER) });
  assert.equal(reader.statusCode, 403);
  assert.equal(reader.json().message, "controller reader lacks the configs:write scope");
  assert.equal(
    (await app.inject({ url: "/v1/machines/prod/w/write", headers: bearer(ADMIN) })).statusCode,
    200,
  );
  assert.equal(
    (await app.inject({ url: "/v1/machines/prod/w/thing", headers: bearer(READER) })).statusCode,
    200,
  );
  const only = await app.inject({ url: "/v1/machines/prod/worker-0/machine-only", headers: bearer(ADMIN) });
  assert.equal(only.statusCode, 403);
  assert.match(only.json().message, /only the machine itself/);
  assert.deepEqual(ran, ["write", "thing"]);
});

test("auth failures a machine route's handler throws count towards the limit: then 429 with Retry-After", async () => {
  const { app, token } = await setup({ failuresPerMinute: 2 });
  const url = "/v1/machines/prod/worker-0/machine-only";
  const codes: string[] = [];
  for (let i = 0; i < 3; i++) codes.push((await app.inject({ url, headers: bearer(token) })).json().code);
  assert.deepEqual(codes, ["TOKEN_EXHAUSTED", "TOKEN_EXHAUSTED", "RATE_LIMITED"]);
  const limited = await app.inject({
    url: "/v1/machines/prod/worker-0/machine-only",
    headers: bearer(token),
  });
  assert.equal(limited.statusCode, 429);
  assert.ok(Number(limited.headers["retry-after"]) > 0);
  // The same token still verifies where it is valid: a credential that verifies is never refused.
  const valid = await app.inject({ url: "/v1/machines/prod/worker-0/thing", headers: bearer(token) });
  assert.equal(valid.statusCode, 200);
});
