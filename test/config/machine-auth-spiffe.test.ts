/**
 * machineAuth.spiffe as configured (src/config/machine-auth-spiffe.ts): SPIFFE ID syntax (the
 * SPIFFE-ID spec's rules, no normalisation), each bundle source's required fields, the schema.
 * The verifier itself runs against the go-spiffe peer (test/service/identity-spiffe.test.ts).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  parseSpiffeId,
  resolveSpiffeMachineAuth,
  SPIFFE_MACHINE_AUTH_SCHEMA,
} from "../../src/config/machine-auth-spiffe.ts";
import { schemaChecker } from "../../src/config/schema-check.ts";
import { BootsealError } from "../../src/errors.ts";

const usage = (text: RegExp) => (e: unknown) =>
  e instanceof BootsealError && e.code === "USAGE" && text.test(e.message);

test("SPIFFE IDs: the spec's syntax; anything a normaliser would change is refused", () => {
  assert.deepEqual(parseSpiffeId("spiffe://example.org/node/web-1"), {
    id: "spiffe://example.org/node/web-1",
    trustDomain: "example.org",
    path: "/node/web-1",
  });
  assert.deepEqual(parseSpiffeId("spiffe://example.org"), {
    id: "spiffe://example.org",
    trustDomain: "example.org",
    path: "",
  });
  for (const bad of [
    "SPIFFE://example.org/x",
    "spiffe://Example.org/x",
    "spiffe://example.org/",
    "spiffe://example.org//x",
    "spiffe://example.org/a/../b",
    "spiffe://example.org/./b",
    "spiffe://example.org/a%2Fb",
    "spiffe://user@example.org/x",
    "spiffe://example.org:443/x",
    "spiffe:///x",
    "https://example.org/x",
    `spiffe://example.org/${"a".repeat(2100)}`,
  ]) {
    assert.equal(parseSpiffeId(bad), null, bad);
  }
});

test("bundle sources: exactly one of file and endpoint; each profile's own fields", () => {
  const one = (td: Record<string, unknown>) =>
    resolveSpiffeMachineAuth({ trustDomains: [{ name: "example.org", ...td }] } as never);
  assert.deepEqual(one({ bundleFile: "/etc/b.json" }).trustDomains[0]?.source, {
    kind: "file",
    path: "/etc/b.json",
  });
  const web = one({ bundleEndpoint: { url: "https://spire.example.org/b", profile: "https_web" } });
  assert.equal(web.trustDomains[0]?.source.kind, "https_web");
  assert.equal(web.maxLifetimeMs, 3600_000);
  assert.equal(web.cooldownMs, 30_000);
  const spiffe = one({
    bundleEndpoint: {
      url: "https://spire.example.org:8443",
      profile: "https_spiffe",
      endpointSpiffeId: "spiffe://example.org/spire/server",
      bootstrapBundleFile: "/etc/b.json",
    },
  }).trustDomains[0]?.source;
  assert.deepEqual(spiffe && { ...spiffe, url: String((spiffe as { url: URL }).url) }, {
    kind: "https_spiffe",
    url: "https://spire.example.org:8443/",
    endpointId: "spiffe://example.org/spire/server",
    bootstrapBundleFile: "/etc/b.json",
  });
  assert.throws(() => one({}), usage(/exactly one of bundleFile and bundleEndpoint/));
  assert.throws(
    () => one({ bundleFile: "/b", bundleEndpoint: { url: "https://x/b", profile: "https_web" } }),
    usage(/exactly one of/),
  );
  assert.throws(
    () => one({ bundleEndpoint: { url: "http://x/b", profile: "https_web" } }),
    usage(/must be an https URL/),
  );
  assert.throws(
    () => one({ bundleEndpoint: { url: "https://x/b", profile: "https_spiffe", bootstrapBundleFile: "/b" } }),
    usage(/endpointSpiffeId: https_spiffe needs/),
  );
  assert.throws(
    () =>
      one({
        bundleEndpoint: {
          url: "https://x/b",
          profile: "https_spiffe",
          endpointSpiffeId: "spiffe://example.org/s",
        },
      }),
    usage(/bootstrapBundleFile: https_spiffe needs/),
  );
  assert.throws(
    () =>
      one({
        bundleEndpoint: {
          url: "https://x/b",
          profile: "https_web",
          endpointSpiffeId: "spiffe://example.org/s",
        },
      }),
    usage(/belong to profile https_spiffe/),
  );
  assert.throws(
    () =>
      resolveSpiffeMachineAuth({
        trustDomains: [
          { name: "a.org", bundleFile: "/1" },
          { name: "a.org", bundleFile: "/2" },
        ],
      }),
    usage(/trustDomains\[1\]\.name: names a trust domain listed before/),
  );
  assert.throws(
    () => resolveSpiffeMachineAuth({ trustDomains: [] }),
    usage(/needs at least one trust domain/),
  );
  assert.throws(
    () =>
      resolveSpiffeMachineAuth({ trustDomains: [{ name: "a.org", bundleFile: "/1" }], maxLifetime: "soon" }),
    usage(/machineAuth\.spiffe\.maxLifetime/),
  );
});

test("the schema: defaults filled, an unknown profile or key refused", () => {
  const check = schemaChecker(SPIFFE_MACHINE_AUTH_SCHEMA);
  const checked = check({ trustDomains: [{ name: "example.org", bundleFile: "/b.json" }] }) as Record<
    string,
    unknown
  >;
  assert.equal(checked.maxLifetime, "1h");
  assert.equal(checked.cooldown, "30s");
  assert.throws(
    () =>
      check({
        trustDomains: [{ name: "example.org", bundleEndpoint: { url: "https://x", profile: "https_jwks" } }],
      }),
    (e: unknown) => e instanceof BootsealError && e.code === "USAGE" && /unknown profile/.test(e.message),
  );
  assert.throws(
    () => check({ trustDomains: [{ name: "Example.org", bundleFile: "/b" }] }),
    (e: unknown) => e instanceof BootsealError,
  );
  assert.throws(
    () => check({ trustDomains: [], jwks: 1 }),
    (e: unknown) => e instanceof BootsealError,
  );
});
