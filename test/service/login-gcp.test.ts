/**
 * Machine login with GCP, end to end: the real `bootseal fetch --auth gcp` (its own process),
 * whose instance identity token comes from a FAKE Compute Engine metadata server reached through
 * GCE_METADATA_HOST (test/fakes/gce-metadata.ts), logs in at the real service app on loopback,
 * which verifies the token against a FAKE Google JWKS endpoint (test/fakes/jwks-server.ts), both
 * signing with a key made for this run (no real Google can run here).
 *
 * The login contract (login-harness.ts): allowed instance: login, fetch, write, report
 * succeeded. An instance bound to another machine: 403. A token for another audience: 401.
 * JWKS down: 503, retried to the deadline. Also: the stub's flags; GCP needs no configuration.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseMachineAuth } from "../../src/config/machine-auth.ts";
import { identityVerifiers, loginFlags } from "../../src/service/identity/index.ts";
import {
  EXAMPLE_INSTANCE,
  type GceMetadataFake,
  IDENTITY_PATH,
  startGceMetadata,
} from "../fakes/gce-metadata.ts";
import { cloudLoginContract } from "./login-harness.ts";

const AUDIENCE = "https://bootseal-gcp.login.test";

function machineAuth(jwksUrl: string) {
  return parseMachineAuth(
    {
      audience: AUDIENCE,
      tokenTtl: "1h",
      aws: { region: "us-east-1" },
      gcp: { jwksUrl, cooldown: 0 },
      bindings: [
        {
          method: "gcp",
          match: { project: EXAMPLE_INSTANCE.projectId, instanceName: "web-*" },
          machines: "prod/*",
        },
        {
          method: "gcp",
          match: { project: EXAMPLE_INSTANCE.projectId, instanceName: "db-1" },
          machines: "prod/db",
        },
      ],
    },
    undefined,
  );
}

cloudLoginContract<GceMetadataFake>({
  method: "gcp",
  label: "gcp (fake metadata server, fake JWKS)",
  labelJwksDown: "gcp (fake metadata server)",
  audience: AUDIENCE,
  kid: "gcp-test-key-1",
  jwks: { shape: "google" },
  machineAuth,
  startFakes: async (signing) => ({
    web: await startGceMetadata(signing, EXAMPLE_INSTANCE),
    db: await startGceMetadata(signing, {
      ...EXAMPLE_INSTANCE,
      instanceName: "db-1",
      instanceId: "5340508760561261531",
    }),
  }),
  env: (fake) => ({ GCE_METADATA_HOST: fake.host }),
  checkAsked(asked) {
    // The fetcher asked for a full-format token for this service's audience.
    assert.equal(asked?.query.get("audience"), AUDIENCE);
    assert.equal(asked?.query.get("format"), "full");
    assert.equal(asked?.headers["metadata-flavor"], "Google");
  },
  credentialFrom: (fake, audience) =>
    fetch(`http://${fake.host}${IDENTITY_PATH}?audience=${encodeURIComponent(audience)}&format=full`, {
      headers: { "metadata-flavor": "Google" },
    }).then((res) => res.text()),
  closedJwksPath: "/oauth2/v3/certs",
  machineWord: "instance",
  tokenName: "identity token",
  notBound:
    /projects\/bootseal-test-1\/zones\/europe-west1-b\/instances\/db-1 is not bound to machine prod\/web-2/,
  wrongAudience: /gcp identity token: claim "aud" does not verify/,
});

test("gcp: the stub passes only the method and the audience; GCP verifies without configuration, Azure needs a tenant", () => {
  const config = machineAuth("https://keys.example/certs");
  assert.deepEqual(loginFlags(config, "gcp"), ["--auth", "gcp", "--server-id", AUDIENCE]);
  const bare = parseMachineAuth({ tokenTtl: "1h", aws: { region: "us-east-1" }, bindings: [] }, undefined);
  assert.equal(bare.gcp.timeoutMs, 5_000);
  assert.equal(bare.azure, undefined);
  assert.deepEqual([...identityVerifiers(bare).keys()].sort(), ["aws-iam", "gcp"]);
});
