/**
 * The `azure` provider (machine side) against the FAKE Azure IMDS (test/fakes/azure-imds.ts):
 * what it asks for, with which headers, how it picks a user-assigned identity, and how each
 * failure of IMDS reads; the token it gets verifies with the service's verifier.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { BootsealError } from "../../src/errors.ts";
import { azureImdsBase, azureProvider } from "../../src/fetcher/identity/azure.ts";
import { azureVerifier } from "../../src/service/identity/azure.ts";
import { EXAMPLE_VM, type RecordedRequest, startAzureImds, TOKEN_PATH } from "../fakes/azure-imds.ts";
import { identityProviderContract, rejectsWith, stand, T } from "./identity-contract.ts";

const AUDIENCE = "api://bootseal-service";
const envAt = (port: number) => ({ BOOTSEAL_AZURE_IMDS_ENDPOINT: `http://127.0.0.1:${port}` });

const azure = identityProviderContract({
  audience: AUDIENCE,
  kid: "imds-kid-1",
  jwks: { shape: "microsoft", tenant: EXAMPLE_VM.tenant },
  provider: (options) => azureProvider(options),
  startFake: (key) => startAzureImds(key),
  envFor: (fake) => ({ BOOTSEAL_AZURE_IMDS_ENDPOINT: fake.endpoint }),
  envAt,
  verify: (token, jwksUrl) => verifyWith(jwksUrl, token),
  asked: {
    title: "fake IMDS: the provider asks for a token for the audience with Metadata: true and api-version",
    check(req: RecordedRequest) {
      assert.equal(req.method, "GET");
      assert.equal(req.path, TOKEN_PATH);
      assert.equal(req.query.get("api-version"), "2018-02-01");
      assert.equal(req.query.get("resource"), AUDIENCE);
      assert.equal(req.query.get("client_id"), null, "no identity named: IMDS picks the system-assigned one");
      assert.equal(req.headers.metadata, "true");
      assert.equal(req.headers["x-forwarded-for"], undefined, "IMDS refuses forwarded requests");
    },
    checkIdentity(id) {
      assert.equal(id.attributes.vmName, "web-1");
    },
  },
  headerless: {
    title:
      "fake IMDS refuses a request without the Metadata header (so the header test above means something)",
    send: (fake) => fetch(`${fake.endpoint}${TOKEN_PATH}?api-version=2018-02-01&resource=x`),
    status: 400,
    text: /Required metadata header not specified/,
  },
  unreachableTitle: "no IMDS (refused, or no answer within the timeout) is KEY_UNAVAILABLE",
});

function verifyWith(jwksUrl: string, token: string) {
  return azureVerifier({ tenant: EXAMPLE_VM.tenant, jwksUrl }).verify(token, {
    audience: AUDIENCE,
    now: new Date(),
  });
}
const verify = (token: string) => verifyWith(azure.jwks.url, token);

test(
  "AZURE_CLIENT_ID picks the user-assigned identity; BOOTSEAL_AZURE_RESOURCE names the resource",
  T,
  async () => {
    const uami = EXAMPLE_VM.userAssigned?.[0];
    assert.ok(uami);
    const fake = await startAzureImds(azure.key);
    try {
      const env = { BOOTSEAL_AZURE_IMDS_ENDPOINT: fake.endpoint, AZURE_CLIENT_ID: uami.clientId };
      const token = await azureProvider().credential({ audience: AUDIENCE, env });
      assert.equal(fake.requests[0]?.query.get("client_id"), uami.clientId);
      const id = await verify(token);
      assert.equal(id.attributes.objectId, uami.objectId);
      assert.equal(id.attributes.vmName, "web-1");
      await azureProvider().credential({
        audience: "https://bootseal.example.com",
        env: { BOOTSEAL_AZURE_IMDS_ENDPOINT: fake.endpoint, BOOTSEAL_AZURE_RESOURCE: AUDIENCE },
      });
      assert.equal(fake.requests[1]?.query.get("resource"), AUDIENCE);
    } finally {
      await fake.close();
    }
  },
);

test("fake IMDS: an identity it cannot find is UNAUTHORIZED with IMDS's reason", T, async () => {
  const fake = await startAzureImds(azure.key);
  try {
    const env = {
      BOOTSEAL_AZURE_IMDS_ENDPOINT: fake.endpoint,
      AZURE_CLIENT_ID: "00000000-0000-4000-8000-000000000000",
    };
    await rejectsWith(
      azureProvider().credential({ audience: AUDIENCE, env }),
      "UNAUTHORIZED",
      /HTTP 400: invalid_request: Identity not found/,
    );
  } finally {
    await fake.close();
  }
  const none = await startAzureImds(azure.key, {
    ...EXAMPLE_VM,
    systemAssigned: undefined,
    userAssigned: [],
  });
  try {
    const env = { BOOTSEAL_AZURE_IMDS_ENDPOINT: none.endpoint };
    await rejectsWith(
      azureProvider().credential({ audience: AUDIENCE, env }),
      "UNAUTHORIZED",
      /Identity not found/,
    );
  } finally {
    await none.close();
  }
});

test("the IMDS endpoint: 169.254.169.254 by default; a bad BOOTSEAL_AZURE_IMDS_ENDPOINT is USAGE", () => {
  assert.equal(azureImdsBase({}).href, "http://169.254.169.254/");
  assert.throws(
    () => azureImdsBase({ BOOTSEAL_AZURE_IMDS_ENDPOINT: "169.254.169.254" }),
    (e: unknown) => e instanceof BootsealError && e.code === "USAGE",
  );
});

test(
  "IMDS's transient answers (404 updating, 410, 429, 500) are KEY_UNAVAILABLE; a body without a token too",
  T,
  async () => {
    let answer: { status: number; body: string } = { status: 200, body: "{}" };
    const imds = await stand((_req, res) => {
      res.writeHead(answer.status, { "content-type": "application/json" }).end(answer.body);
    });
    const get = () =>
      azureProvider().credential({
        audience: AUDIENCE,
        env: envAt(imds.port),
      });
    try {
      await rejectsWith(get(), "KEY_UNAVAILABLE", /holds no access token/);
      answer = { status: 200, body: "not json" };
      await rejectsWith(get(), "KEY_UNAVAILABLE", /holds no access token/);
      for (const status of [404, 410, 429, 500]) {
        answer = { status, body: JSON.stringify({ error: "temporarily_unavailable" }) };
        await rejectsWith(get(), "KEY_UNAVAILABLE", new RegExp(`HTTP ${status}: temporarily_unavailable`));
      }
      answer = { status: 403, body: "" };
      await rejectsWith(get(), "UNAUTHORIZED", /refused the token \(HTTP 403\)/);
    } finally {
      await imds.close();
    }
  },
);
