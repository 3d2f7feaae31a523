/**
 * `spec.tpm` of a BootsealConfig (src/controller/spec.ts) and where the controller finds the
 * machine's EK (src/controller/tpm-ek.ts): the Machine's annotation first, else the field the
 * spec names on the infrastructure object; PEM or base64 DER in, base64 DER SubjectPublicKeyInfo
 * out (what the service's X-Bootseal-Tpm-Ek takes). The Cluster API end to end is in
 * capi-real.test.ts.
 */
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { test } from "node:test";
import type { Obj } from "../../src/controller/capi-objects.ts";
import { ANNOTATION_TPM_EK, validateSpec } from "../../src/controller/spec.ts";
import { tpmSealOf } from "../../src/controller/tpm-ek.ts";

const inner = { apiVersion: "bootstrap.cluster.x-k8s.io/v1beta2", kind: "KubeadmConfig", spec: {} };
const PCR7 = "3D458CFE55CC03EA1F443F1562BEEC8DF51C75E14A9FCF9A7234A13F198E7969";
const { publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const DER = publicKey.export({ format: "der", type: "spki" }).toString("base64");
const PEM = publicKey.export({ format: "pem", type: "spki" }).toString();

const machine = (annotations: Record<string, string> = {}): Obj =>
  ({
    apiVersion: "cluster.x-k8s.io/v1beta2",
    kind: "Machine",
    metadata: { name: "m", namespace: "ns", annotations },
  }) as Obj;
const infra = (status: Record<string, unknown>): Obj =>
  ({ apiVersion: "infra/v1", kind: "Host", metadata: { name: "h", namespace: "ns" }, status }) as Obj;

test("spec.tpm: ekFieldPath and pcrs checked, kept as given; absent stays absent", () => {
  assert.equal(validateSpec({ inner }).tpm, undefined);
  assert.deepEqual(validateSpec({ inner, tpm: {} }).tpm, {});
  assert.deepEqual(
    validateSpec({ inner, tpm: { ekFieldPath: "status.tpm.ekPublic", pcrs: { "7": PCR7 } } }).tpm,
    {
      ekFieldPath: "status.tpm.ekPublic",
      pcrs: { "7": PCR7 },
    },
  );
  for (const [tpm, message] of [
    ["yes", /tpm must be an object/],
    [{ ekFieldPath: "status..ek" }, /ekFieldPath must be a dotted field path/],
    [{ ekFieldPath: "status.ek[0]" }, /ekFieldPath/],
    [{ pcrs: {} }, /tpm.pcrs must map 1 to 24/],
    [{ pcrs: { "24": PCR7 } }, /24 is not a PCR number/],
    [{ pcrs: { "07": PCR7 } }, /07 is not a PCR number/],
    [{ pcrs: { "7": "abc" } }, /tpm.pcrs.7 must be a sha256 value/],
  ] as const)
    assert.throws(() => validateSpec({ inner, tpm }), message, JSON.stringify(tpm));
});

test("the EK: the Machine's annotation (PEM or base64 DER) wins over the infrastructure's field; none yet is null", () => {
  const spec = { ekFieldPath: "status.tpm.ekPublic", pcrs: { "7": PCR7 } };
  const expected = { ekPublic: DER, pcrs: `7=${PCR7.toLowerCase()}` };
  assert.deepEqual(tpmSealOf(spec, machine({ [ANNOTATION_TPM_EK]: PEM }), null), expected);
  assert.deepEqual(
    tpmSealOf(spec, machine({ [ANNOTATION_TPM_EK]: DER }), infra({ tpm: { ekPublic: "junk" } })),
    expected,
  );
  assert.deepEqual(tpmSealOf(spec, machine(), infra({ tpm: { ekPublic: PEM } })), expected);
  assert.deepEqual(tpmSealOf({}, machine({ [ANNOTATION_TPM_EK]: `\n${DER}\n` }), null), { ekPublic: DER });
  assert.equal(tpmSealOf(spec, machine(), null), null, "no infrastructure object yet");
  assert.equal(tpmSealOf(spec, machine(), infra({ tpm: {} })), null, "not reported yet");
  assert.equal(
    tpmSealOf({}, machine(), infra({ tpm: { ekPublic: PEM } })),
    null,
    "no path: the annotation only",
  );
});

test("an EK that is not a public key is BAD_INPUT naming where it came from", () => {
  assert.throws(
    () => tpmSealOf({}, machine({ [ANNOTATION_TPM_EK]: "not a key" }), null),
    (err: Error & { code?: string }) =>
      err.code === "BAD_INPUT" &&
      /annotation bootstrap.bootseal.dev\/tpm-ek is not a public key/.test(err.message),
  );
  assert.throws(
    () =>
      tpmSealOf(
        { ekFieldPath: "status.ek" },
        machine(),
        infra({ ek: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----" }),
      ),
    /Host h status.ek is not a public key/,
  );
});
