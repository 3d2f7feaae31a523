/**
 * The CRDs (deploy/helm/bootseal/crds/) say what src/controller/spec.ts says: names, contract
 * labels, enums and defaults, the status subresource and printer columns, and the template's
 * spec.template.spec is the config's spec. Installed for real by test/controller/e2e.test.ts.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { parse } from "yaml";
import {
  EK_FIELD_PATH,
  GROUP,
  KIND,
  PAYLOADS,
  PLURAL,
  TEMPLATE_KIND,
  TEMPLATE_PLURAL,
  USER_DATA_FORMATS,
  VERSION,
} from "../../src/controller/spec.ts";
import { PHASES as MACHINE_PHASES } from "../../src/machine/status-protocol.ts";
import { REPO } from "../fetcher/helpers.ts";

// biome-ignore lint/suspicious/noExplicitAny: a parsed YAML document
type Any = any;
const load = (plural: string): Any =>
  parse(readFileSync(`${REPO}/deploy/helm/bootseal/crds/${GROUP}_${plural}.yaml`, "utf8"));

for (const [plural, kind, short] of [
  [PLURAL, KIND, "bsc"],
  [TEMPLATE_PLURAL, TEMPLATE_KIND, "bsct"],
] as const) {
  test(`${kind}: names, scope, contract labels, one served storage version`, () => {
    const crd = load(plural);
    assert.equal(crd.metadata.name, `${plural}.${GROUP}`);
    assert.deepEqual(crd.metadata.labels, {
      "cluster.x-k8s.io/v1beta2": VERSION,
      "cluster.x-k8s.io/provider": "bootstrap-bootseal",
    });
    assert.equal(crd.spec.group, GROUP);
    assert.equal(crd.spec.scope, "Namespaced");
    assert.equal(crd.spec.names.kind, kind);
    assert.equal(crd.spec.names.plural, plural);
    assert.deepEqual(crd.spec.names.shortNames, [short]);
    assert.deepEqual(
      crd.spec.versions.map((v: Any) => [v.name, v.served, v.storage]),
      [[VERSION, true, true]],
    );
  });
}

test("BootsealConfig: status subresource, printer columns, enums and defaults from spec.ts", () => {
  const v = load(PLURAL).spec.versions[0];
  assert.deepEqual(v.subresources, { status: {} });
  assert.deepEqual(
    v.additionalPrinterColumns.map((c: Any) => c.name),
    ["Ready", "Phase", "DataSecret", "Age"],
  );
  const spec = v.schema.openAPIV3Schema.properties.spec;
  assert.deepEqual(spec.properties.userDataFormat.enum, [...USER_DATA_FORMATS]);
  assert.equal(spec.properties.userDataFormat.default, "cloud-init");
  assert.deepEqual(spec.properties.payload.enum, [...PAYLOADS]);
  assert.equal(spec.properties.deleteConfigOnNodeRef.default, true);
  assert.equal(spec.properties.tpm.properties.ekFieldPath.pattern, EK_FIELD_PATH.source);
  assert.equal(spec.properties.inner.properties.spec["x-kubernetes-preserve-unknown-fields"], true);
  const status = v.schema.openAPIV3Schema.properties.status.properties;
  assert.deepEqual(status.phase.enum, [...MACHINE_PHASES]);
  assert.equal(status.initialization.properties.dataSecretCreated.type, "boolean");
  assert.equal(status.ready.type, "boolean");
  assert.equal(status.dataSecretName.type, "string");
});

test("BootsealConfigTemplate: spec.template.spec is exactly the BootsealConfig spec", () => {
  const config = load(PLURAL).spec.versions[0].schema.openAPIV3Schema.properties.spec;
  const tmpl = load(TEMPLATE_PLURAL).spec.versions[0].schema.openAPIV3Schema.properties.spec;
  assert.deepEqual(tmpl.properties.template.properties.spec, config);
});
