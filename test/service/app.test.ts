import assert from "node:assert/strict";
import { test } from "node:test";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { until } from "../helpers/until.ts";
import { appConfig } from "./app-config.ts";

const rules = parseSopsConfig(
  "creation_rules:\n  - age: age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n",
  "test",
);

test("readyz answers 503 with Retry-After and names the failing check", async () => {
  const app = buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({ creationRules: rules, controllers: [] }),
    probes: [
      {
        name: "kms",
        check: async () => {
          throw new Error("connection refused to secret-endpoint");
        },
      },
    ],
  });
  const res = await app.inject({ method: "GET", url: "/readyz" });
  assert.equal(res.statusCode, 503);
  assert.equal(res.headers["retry-after"], "5");
  // The first probe starts preparing the fetcher executables (none here): not ready yet.
  assert.deepEqual(res.json(), {
    status: "unavailable",
    checks: { store: "ok", artifacts: "unavailable", kms: "unavailable" },
  });
  assert.ok(!res.body.includes("secret-endpoint"), "the cause stays out of the response");
  await until("the executables are prepared", async () => {
    const again = await app.inject({ method: "GET", url: "/readyz" });
    return (again.json() as { checks: Record<string, string> }).checks.artifacts === "ok";
  });
  await app.close();
});

test("unknown routes get the {code, message} error shape", async () => {
  const app = buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({ creationRules: rules, controllers: [] }),
  });
  const res = await app.inject({ method: "POST", url: "/v1/x" });
  assert.equal(res.statusCode, 404);
  assert.deepEqual(res.json(), { code: "NOT_FOUND", message: "no such route" });
  await app.close();
});
