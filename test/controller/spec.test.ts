/** The BootsealConfig spec check and defaults (src/controller/spec.ts), and the condition list rules. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { setCondition } from "../../src/controller/conditions.ts";
import { payloadMismatch, validateSpec } from "../../src/controller/spec.ts";
import { BootsealError } from "../../src/errors.ts";

const inner = {
  apiVersion: "bootstrap.cluster.x-k8s.io/v1beta2",
  kind: "KubeadmConfig",
  spec: { joinConfiguration: {} },
};

test("defaults: cloud-init, deleteConfigOnNodeRef true, no payload, no command", () => {
  assert.deepEqual(validateSpec({ inner }), {
    inner,
    userDataFormat: "cloud-init",
    skipModules: [],
    deleteConfigOnNodeRef: true,
  });
  assert.deepEqual(validateSpec({ inner, skipModules: ["ntp", "users_groups"] }).skipModules, [
    "ntp",
    "users_groups",
  ]);
  for (const skipModules of ["ntp", ["Ntp"], ["ntp mounts"], [1]])
    assert.throws(() => validateSpec({ inner, skipModules }), /skipModules/);
  const t = validateSpec({
    inner: { apiVersion: inner.apiVersion, kind: "KubeadmConfig", templateRef: { name: "workers" } },
    userDataFormat: "ignition",
    payload: "ignition",
    bootstrapCommand: "kubeadm join --config /etc/kubeadm.yaml",
    deleteConfigOnNodeRef: false,
  });
  assert.deepEqual(t.inner.templateRef, { name: "workers" });
  assert.equal(t.userDataFormat, "ignition");
  assert.equal(t.payload, "ignition");
  assert.equal(t.deleteConfigOnNodeRef, false);
  assert.equal(t.bootstrapCommand, "kubeadm join --config /etc/kubeadm.yaml");
});

const refused: [string, unknown, RegExp][] = [
  ["no spec", undefined, /spec is missing/],
  ["no inner", {}, /spec\.inner is missing/],
  ["bad apiVersion", { inner: { ...inner, apiVersion: "v1" } }, /inner\.apiVersion/],
  ["bad kind", { inner: { ...inner, kind: "kubeadmConfig" } }, /inner\.kind/],
  ["nested", { inner: { ...inner, apiVersion: "bootstrap.bootseal.dev/v1alpha1" } }, /no nesting/],
  ["both spec and templateRef", { inner: { ...inner, templateRef: { name: "x" } } }, /exactly one/],
  ["neither", { inner: { apiVersion: inner.apiVersion, kind: inner.kind } }, /exactly one/],
  ["spec not an object", { inner: { ...inner, spec: [] } }, /inner\.spec must be an object/],
  [
    "bad template name",
    { inner: { apiVersion: inner.apiVersion, kind: inner.kind, templateRef: { name: "A B" } } },
    /templateRef\.name/,
  ],
  [
    "unknown format",
    { inner, userDataFormat: "cloud-config" },
    /userDataFormat must be one of cloud-init, ignition, powershell/,
  ],
  ["unknown payload", { inner, payload: "auto" }, /payload must be one of/],
  ["command with a newline", { inner, bootstrapCommand: "a\nb" }, /printable/],
  ["command too long", { inner, bootstrapCommand: "x".repeat(4097) }, /4096 bytes/],
  ["deleteConfigOnNodeRef as a string", { inner, deleteConfigOnNodeRef: "yes" }, /true or false/],
];
for (const [what, spec, message] of refused) {
  test(`refused: ${what} (BAD_INPUT)`, () => {
    assert.throws(
      () => validateSpec(spec),
      (err: unknown) => err instanceof BootsealError && err.code === "BAD_INPUT" && message.test(err.message),
    );
  });
}

test("payloadMismatch: the kind named in the spec against the inner data", () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  assert.equal(payloadMismatch(undefined, enc("anything")), null);
  assert.equal(payloadMismatch("cloud-config", enc("#cloud-config\nruncmd: []\n")), null);
  assert.equal(payloadMismatch("cloud-config", enc("## template: jinja\n#cloud-config\n")), null);
  assert.match(
    payloadMismatch("cloud-config", enc('{"ignition":{"version":"3.4.0"}}')) ?? "",
    /#cloud-config/,
  );
  assert.equal(payloadMismatch("ignition", enc('{"ignition":{"version":"3.4.0"}}')), null);
  // The kubeadm provider's Flatcar output (spec 2.3.0) is Ignition too.
  assert.equal(payloadMismatch("ignition", enc('{"ignition":{"version":"2.3.0"}}')), null);
  assert.equal(payloadMismatch("ignition", enc('{"ignition":{"version":"2.2.0"}}')), null);
  assert.match(payloadMismatch("ignition", enc('{"ignition":{"version":"1.0.0"}}')) ?? "", /Ignition config/);
  assert.match(payloadMismatch("ignition", enc("#cloud-config\n")) ?? "", /Ignition config/);
  assert.equal(payloadMismatch("raw", enc("\u0000")), null);
});

test("setCondition: lastTransitionTime moves only on a status change; one entry per type, in order", () => {
  const t0 = new Date("2026-12-01T00:00:00.123Z");
  const t1 = new Date("2026-12-01T00:05:00Z");
  let list = setCondition(
    undefined,
    { type: "Published", status: "False", reason: "ServiceUnavailable", message: "down" },
    2,
    t0,
  );
  list = setCondition(
    list,
    { type: "Ready", status: "False", reason: "ServiceUnavailable", message: "down" },
    2,
    t0,
  );
  assert.deepEqual(
    list.map((c) => c.type),
    ["Ready", "Published"],
  );
  assert.equal(list[1]?.lastTransitionTime, "2026-12-01T00:00:00Z");
  list = setCondition(
    list,
    { type: "Published", status: "False", reason: "ServiceUnavailable", message: "still down" },
    3,
    t1,
  );
  assert.equal(list.find((c) => c.type === "Published")?.lastTransitionTime, "2026-12-01T00:00:00Z");
  assert.equal(list.find((c) => c.type === "Published")?.observedGeneration, 3);
  list = setCondition(
    list,
    { type: "Published", status: "True", reason: "Published", message: "version 1" },
    3,
    t1,
  );
  assert.equal(list.find((c) => c.type === "Published")?.lastTransitionTime, "2026-12-01T00:05:00Z");
  assert.equal(list.length, 2);
  const odd = setCondition(
    [],
    { type: "X", status: "True", reason: "not camel case", message: "" },
    undefined,
    t1,
  );
  assert.equal(odd[0]?.reason, "Unknown");
});
