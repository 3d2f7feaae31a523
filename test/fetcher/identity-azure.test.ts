/**
 * The `azure` provider (machine side) against the FAKE Azure IMDS (test/fakes/azure-imds.ts):
 * what it asks for, with which headers, how it picks a user-assigned identity, and how each
 * failure of IMDS reads; the token it gets verifies with the service's verifier.
 */
import assert from "node:assert/strict";
import { createServer, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { BootsealError } from "../../src/errors.ts";
import { azureImdsBase, azureProvider } from "../../src/fetcher/identity/azure.ts";
import { azureVerifier } from "../../src/service/identity/azure.ts";
import { EXAMPLE_VM, startAzureImds, TOKEN_PATH } from "../fakes/azure-imds.ts";
import { type JwksServer, makeTestKey, startJwksServer, type TestKey } from "../fakes/jwks-server.ts";
import { freePort } from "../helpers/ports.ts";

const AUDIENCE = "api://bootseal-service";
const T = { timeout: 60_000 };

let key: TestKey;
let jwks: JwksServer;

before(async () => {
  key = await makeTestKey("imds-kid-1");
  jwks = await startJwksServer([key], { shape: "microsoft", tenant: EXAMPLE_VM.tenant });
});
after(() => jwks.close());

async function rejectsWith(p: Promise<unknown>, code: string, text: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof BootsealError, `a BootsealError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    assert.match(err.message, text);
    return true;
  });
}

async function stand(handler: RequestListener): Promise<{ endpoint: string; close(): Promise<void> }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const verify = (token: string) =>
  azureVerifier({ tenant: EXAMPLE_VM.tenant, jwksUrl: jwks.url }).verify(token, {
    audience: AUDIENCE,
    now: new Date(),
  });

test(
  "fake IMDS: the provider asks for a token for the audience with Metadata: true and api-version",
  T,
  async () => {
    const fake = await startAzureImds(key);
    try {
      const token = await azureProvider().credential({
        audience: AUDIENCE,
        env: { BOOTSEAL_AZURE_IMDS_ENDPOINT: fake.endpoint },
      });
      assert.equal(fake.requests.length, 1);
      const req = fake.requests[0];
      assert.ok(req);
      assert.equal(req.method, "GET");
      assert.equal(req.path, TOKEN_PATH);
      assert.equal(req.query.get("api-version"), "2018-02-01");
      assert.equal(req.query.get("resource"), AUDIENCE);
      assert.equal(req.query.get("client_id"), null, "no identity named: IMDS picks the system-assigned one");
      assert.equal(req.headers.metadata, "true");
      assert.equal(req.headers["x-forwarded-for"], undefined, "IMDS refuses forwarded requests");
      const id = await verify(token);
      assert.equal(id.attributes.vmName, "web-1");
    } finally {
      await fake.close();
    }
  },
);

test(
  "fake IMDS refuses a request without the Metadata header (so the header test above means something)",
  T,
  async () => {
    const fake = await startAzureImds(key);
    try {
      const res = await fetch(`${fake.endpoint}${TOKEN_PATH}?api-version=2018-02-01&resource=x`);
      assert.equal(res.status, 400);
      assert.match(await res.text(), /Required metadata header not specified/);
    } finally {
      await fake.close();
    }
  },
);

test(
  "AZURE_CLIENT_ID picks the user-assigned identity; BOOTSEAL_AZURE_RESOURCE names the resource",
  T,
  async () => {
    const uami = EXAMPLE_VM.userAssigned?.[0];
    assert.ok(uami);
    const fake = await startAzureImds(key);
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
  const fake = await startAzureImds(key);
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
  const none = await startAzureImds(key, { ...EXAMPLE_VM, systemAssigned: undefined, userAssigned: [] });
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

test(
  "no IMDS (refused, or no answer within the timeout) is KEY_UNAVAILABLE; a bad endpoint is USAGE",
  T,
  async () => {
    const env = { BOOTSEAL_AZURE_IMDS_ENDPOINT: `http://127.0.0.1:${await freePort()}` };
    await rejectsWith(
      azureProvider().credential({ audience: AUDIENCE, env }),
      "KEY_UNAVAILABLE",
      /unreachable \(ECONNREFUSED\)/,
    );
    const silent = await stand(() => {
      // holds the request: never answers
    });
    try {
      const p = azureProvider({ timeoutMs: 200 }).credential({
        audience: AUDIENCE,
        env: { BOOTSEAL_AZURE_IMDS_ENDPOINT: silent.endpoint },
      });
      await rejectsWith(p, "KEY_UNAVAILABLE", /no answer within 200 ms/);
    } finally {
      await silent.close();
    }
    assert.equal(azureImdsBase({}).href, "http://169.254.169.254/");
    assert.throws(
      () => azureImdsBase({ BOOTSEAL_AZURE_IMDS_ENDPOINT: "169.254.169.254" }),
      (e: unknown) => e instanceof BootsealError && e.code === "USAGE",
    );
  },
);

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
        env: { BOOTSEAL_AZURE_IMDS_ENDPOINT: imds.endpoint },
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
