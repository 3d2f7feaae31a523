import assert from "node:assert/strict";
import { test } from "node:test";
import { checkMachineId } from "../../src/envelope/encrypted-config/document.ts";
import { BootsealError } from "../../src/errors.ts";
import {
  DNS_LABEL_MAX,
  DNS_LABEL_PATTERN,
  formatMachineId,
  isDnsLabel,
  machineIdFrom,
  parseMachineId,
  sameMachine,
} from "../../src/machine/machine-id.ts";

const GOOD = ["a", "0", "web-1", "a-b-c", "x".repeat(DNS_LABEL_MAX), `a${"-".repeat(61)}b`];
const BAD = ["", "-a", "a-", "A", "web_1", "a.b", "a/b", " a", "a\n", "x".repeat(DNS_LABEL_MAX + 1), "é"];

test("DNS-1123 labels: lower-case alphanumerics and inner '-', 1 to 63 characters", () => {
  for (const label of GOOD) assert.equal(isDnsLabel(label), true, JSON.stringify(label));
  for (const label of BAD) assert.equal(isDnsLabel(label), false, JSON.stringify(label));
});

test("the pattern alone is the rule (schemas use it as text), length bound included", () => {
  const re = new RegExp(DNS_LABEL_PATTERN);
  for (const label of [...GOOD, ...BAD])
    assert.equal(re.test(label), isDnsLabel(label), JSON.stringify(label));
});

test("the envelope's own machine-id rule accepts exactly the same ids", () => {
  const ids = [
    ...GOOD.flatMap((a) => [`${a}/web`, `prod/${a}`]),
    ...BAD.map((b) => `prod/${b}`),
    "a/b/c",
    "ab",
  ];
  for (const id of ids) {
    let envelope: boolean;
    try {
      checkMachineId(id);
      envelope = true;
    } catch {
      envelope = false;
    }
    assert.equal(machineIdFrom(id) !== null, envelope, id);
  }
});

test("ns/name text round-trips; anything but two labels is null", () => {
  const m = { namespace: "prod", name: "worker-0" };
  assert.equal(formatMachineId(m), "prod/worker-0");
  assert.deepEqual(machineIdFrom("prod/worker-0"), m);
  for (const text of ["prod", "prod/", "/worker-0", "prod/worker-0/x", "Prod/worker-0", "prod/worker.0"]) {
    assert.equal(machineIdFrom(text), null, text);
  }
  assert.equal(sameMachine(m, { namespace: "prod", name: "worker-0" }), true);
  assert.equal(sameMachine(m, { namespace: "prod", name: "worker-1" }), false);
  assert.equal(sameMachine(m, { namespace: "dev", name: "worker-0" }), false);
});

test("parseMachineId: USAGE naming where the text came from", () => {
  assert.deepEqual(parseMachineId("dev/a"), { namespace: "dev", name: "a" });
  assert.throws(
    () => parseMachineId("dev/A", "the configs/ key"),
    (err: unknown) =>
      err instanceof BootsealError &&
      err.code === "USAGE" &&
      err.message === 'the configs/ key wants NAMESPACE/NAME (DNS-1123 labels), got "dev/A"',
  );
  assert.throws(() => parseMachineId("dev"), /^BootsealError: --machine wants NAMESPACE\/NAME/);
});
