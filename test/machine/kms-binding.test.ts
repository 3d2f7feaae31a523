import assert from "node:assert/strict";
import { test } from "node:test";
import type { KeyEntry } from "../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../src/errors.ts";
import {
  bindContext,
  bindKeyGroups,
  checkMachineBinding,
  MACHINE_CONTEXT_KEY,
} from "../../src/machine/kms-binding.ts";

const ARN = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab";
const m = { namespace: "prod", name: "worker-0" };

function kms(context?: Record<string, string>): KeyEntry {
  const fields = new Map<string, string | Record<string, string>>([["arn", ARN]]);
  if (context) fields.set("context", context);
  return { kind: "kms", enc: "", fields };
}
const age: KeyEntry = { kind: "age", enc: "", fields: new Map([["recipient", "age1example"]]) };

test("bindContext merges the machine in and wins over a same-named key", () => {
  assert.deepEqual(bindContext(undefined, m), { [MACHINE_CONTEXT_KEY]: "prod/worker-0" });
  assert.deepEqual(bindContext({ team: "a", [MACHINE_CONTEXT_KEY]: "dev/x" }, "prod/worker-0"), {
    team: "a",
    [MACHINE_CONTEXT_KEY]: "prod/worker-0",
  });
});

test("bindKeyGroups binds every AWS KMS entry, keeps its context, leaves other kinds and the input alone", () => {
  const groups = [[kms({ team: "a" }), age], [kms()]];
  const bound = bindKeyGroups(groups, m);
  assert.deepEqual(bound[0]?.[0]?.fields.get("context"), {
    team: "a",
    [MACHINE_CONTEXT_KEY]: "prod/worker-0",
  });
  assert.equal(bound[0]?.[0]?.fields.get("arn"), ARN);
  assert.equal(bound[0]?.[1], age, "an age entry is passed through as it is");
  assert.deepEqual(bound[1]?.[0]?.fields.get("context"), { [MACHINE_CONTEXT_KEY]: "prod/worker-0" });
  assert.deepEqual(
    groups[0]?.[0]?.fields.get("context"),
    { team: "a" },
    "the rule's entries are not changed",
  );
  assert.equal(groups[1]?.[0]?.fields.has("context"), false);
});

test("checkMachineBinding: the bound machine passes, another is FORBIDDEN before any key call", () => {
  const metadata = { keyGroups: bindKeyGroups([[age, kms()]], m) };
  checkMachineBinding(metadata, "prod/worker-0");
  checkMachineBinding(metadata, null);
  assert.throws(
    () => checkMachineBinding(metadata, "prod/worker-1"),
    (err: unknown) =>
      err instanceof BootsealError &&
      err.code === "FORBIDDEN" &&
      /"prod\/worker-0".*prod\/worker-1/.test(err.message),
  );
});

test("documents without a binding pass for any machine", () => {
  checkMachineBinding({ keyGroups: [[age, kms(), kms({ team: "a" })]] }, "prod/worker-1");
});
