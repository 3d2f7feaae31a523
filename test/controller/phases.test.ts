/** The machine's bootseal phase as status.phase and the MachineBootstrapped condition (src/controller/phase-conditions.ts). */
import assert from "node:assert/strict";
import { test } from "node:test";
import { phaseView } from "../../src/controller/phase-conditions.ts";
import { isTerminalPhase as isTerminal } from "../../src/machine/status-protocol.ts";

const history = (...entries: object[]) => entries as { phase: string }[];

test("published: waiting for the machine", () => {
  const v = phaseView({
    phase: "published",
    history: history({ phase: "published", by: "e2e", version: 1 }),
  });
  assert.equal(v.phase, "published");
  assert.deepEqual(v.condition, {
    type: "MachineBootstrapped",
    status: "False",
    reason: "WaitingForMachine",
    message: "published; the machine has not fetched its config yet",
  });
});

test("intermediate phases: the reason is the phase in CamelCase, the machine's message follows", () => {
  for (const [phase, reason] of [
    ["fetching", "Fetching"],
    ["decrypted", "Decrypted"],
    ["written", "Written"],
    ["running", "Running"],
  ]) {
    const v = phaseView({ phase: phase as string, history: history({ phase, message: "kubeadm join" }) });
    assert.equal(v.phase, phase);
    assert.equal(v.condition.status, "False");
    assert.equal(v.condition.reason, reason);
    assert.equal(v.condition.message, `${phase}: kubeadm join`);
  }
});

test("succeeded: True", () => {
  const v = phaseView({
    phase: "succeeded",
    history: history({ phase: "running" }, { phase: "succeeded", exitCode: 0 }),
  });
  assert.equal(v.condition.status, "True");
  assert.equal(v.condition.reason, "Succeeded");
  assert.ok(isTerminal(v.phase));
});

test("failed: the exit code, the attempt and the machine's reason in the message (control characters dropped)", () => {
  const v = phaseView({
    phase: "failed",
    history: history(
      { phase: "failed", exitCode: 3, attempt: 1, message: "old" },
      { phase: "running" },
      { phase: "failed", exitCode: 60, attempt: 2, message: "EXEC_FAILED: kubeadm\u001b[31m exited 1" },
    ),
  });
  assert.equal(v.phase, "failed");
  assert.equal(v.condition.reason, "Failed");
  assert.equal(v.condition.status, "False");
  assert.equal(
    v.condition.message,
    "the machine reported failed: exit code 60; attempt 2; EXEC_FAILED: kubeadm [31m exited 1",
  );
  assert.ok(isTerminal("failed"));
  assert.ok(!isTerminal("running"));
});

test("a phase the controller does not know: Unknown, no status.phase", () => {
  const v = phaseView({ phase: "rebooting", history: [] });
  assert.equal(v.phase, undefined);
  assert.equal(v.condition.status, "Unknown");
  assert.equal(v.condition.reason, "UnknownPhase");
});
