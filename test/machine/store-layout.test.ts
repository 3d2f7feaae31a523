import assert from "node:assert/strict";
import { test } from "node:test";
import {
  CONFIGS_PREFIX,
  configKey,
  configKeyMachineText,
  machineFromStatusKey,
  READINESS_PROBE_KEY,
  statusKey,
  statusPrefix,
  tokenKey,
} from "../../src/machine/store-layout.ts";

const m = { namespace: "prod", name: "worker-0" };

test("the layout of design.md: configs, tokens and status per machine", () => {
  assert.equal(configKey(m), "configs/prod/worker-0");
  assert.equal(tokenKey(m), "tokens/prod/worker-0.json");
  assert.equal(statusKey(m), "status/prod/worker-0.json");
  assert.ok(configKey(m).startsWith(CONFIGS_PREFIX));
  assert.equal(statusPrefix(), "status/");
  assert.equal(statusPrefix("prod"), "status/prod/");
  assert.ok(statusKey(m).startsWith(statusPrefix("prod")));
});

test("a status key parses back to its machine; other keys under status/ do not", () => {
  assert.deepEqual(machineFromStatusKey(statusKey(m)), m);
  for (const key of [
    READINESS_PROBE_KEY,
    "status/prod/worker-0",
    "status/prod/worker-0.json.tmp",
    "status/prod/sub/worker-0.json",
    "status/Prod/worker-0.json",
    "status/prod/worker_0.json",
    "tokens/prod/worker-0.json",
  ]) {
    assert.equal(machineFromStatusKey(key), null, key);
  }
});

test("the readiness probe key can never be a machine's status key", () => {
  assert.ok(READINESS_PROBE_KEY.startsWith(statusPrefix()));
  assert.equal(machineFromStatusKey(READINESS_PROBE_KEY), null);
});

test("config keys name their machine exactly, or below a prefix when nested", () => {
  assert.equal(configKeyMachineText(configKey(m)), "prod/worker-0");
  assert.equal(configKeyMachineText("site-a/configs/prod/worker-0"), null);
  assert.equal(configKeyMachineText("site-a/configs/prod/worker-0", true), "prod/worker-0");
  assert.equal(configKeyMachineText("/srv/store/configs/prod/worker-0", true), "prod/worker-0");
  assert.equal(configKeyMachineText("myconfigs/prod/worker-0", true), null, "a segment, not a suffix");
  assert.equal(configKeyMachineText("configs/prod/worker-0/extra"), null);
  assert.equal(configKeyMachineText("configs/prod"), null);
  // Unchecked on purpose: callers decide what a bad label means.
  assert.equal(configKeyMachineText("configs/Prod/x"), "Prod/x");
});
