/**
 * The `gcp` provider (machine side) against the FAKE Compute Engine metadata server
 * (test/fakes/gce-metadata.ts): what it asks for, with which headers, and how each failure of
 * the metadata server reads; the token it gets verifies with the service's verifier.
 */
import assert from "node:assert/strict";
import { createServer, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { BootsealError } from "../../src/errors.ts";
import { gceMetadataBase, gcpProvider } from "../../src/fetcher/identity/gcp.ts";
import { gcpVerifier } from "../../src/service/identity/gcp.ts";
import { EXAMPLE_INSTANCE, IDENTITY_PATH, startGceMetadata } from "../fakes/gce-metadata.ts";
import { type JwksServer, makeTestKey, startJwksServer, type TestKey } from "../fakes/jwks-server.ts";
import { freePort } from "../helpers/ports.ts";

const AUDIENCE = "https://bootseal.example.com:8443";
const T = { timeout: 60_000 };

let key: TestKey;
let jwks: JwksServer;

before(async () => {
  key = await makeTestKey("gce-kid-1");
  jwks = await startJwksServer([key]);
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

/** A plain local HTTP server standing where the metadata server should be. */
async function stand(handler: RequestListener): Promise<{ host: string; close(): Promise<void> }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    host: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

test(
  "fake metadata server: the provider asks for a format=full token for the audience, with Metadata-Flavor: Google",
  T,
  async () => {
    const fake = await startGceMetadata(key);
    try {
      const token = await gcpProvider().credential({
        audience: AUDIENCE,
        env: { GCE_METADATA_HOST: fake.host },
      });
      assert.equal(fake.requests.length, 1);
      const req = fake.requests[0];
      assert.ok(req);
      assert.equal(req.method, "GET");
      assert.equal(req.path, IDENTITY_PATH);
      assert.equal(req.query.get("audience"), AUDIENCE);
      assert.equal(req.query.get("format"), "full");
      assert.equal(req.headers["metadata-flavor"], "Google");
      assert.equal(
        req.headers["x-forwarded-for"],
        undefined,
        "the metadata server refuses forwarded requests",
      );
      assert.equal(req.headers.authorization, undefined);
      // The service's verifier accepts it: the two sides agree on the wire shape.
      const id = await gcpVerifier({ jwksUrl: jwks.url }).verify(token, {
        audience: AUDIENCE,
        now: new Date(),
      });
      assert.equal(id.attributes.instanceName, EXAMPLE_INSTANCE.instanceName);
      assert.equal(id.attributes.projectNumber, String(EXAMPLE_INSTANCE.projectNumber));
    } finally {
      await fake.close();
    }
  },
);

test(
  "fake metadata server refuses a request without Metadata-Flavor (so the header test above means something)",
  T,
  async () => {
    const fake = await startGceMetadata(key);
    try {
      const res = await fetch(`http://${fake.host}${IDENTITY_PATH}?audience=x&format=full`);
      assert.equal(res.status, 403);
      assert.match(await res.text(), /Missing Metadata-Flavor:Google header/);
    } finally {
      await fake.close();
    }
  },
);

test("GCE_METADATA_HOST as host:port or URL, GCE_METADATA_IP first, metadata.google.internal by default", () => {
  assert.equal(gceMetadataBase({}).href, "http://metadata.google.internal/");
  assert.equal(gceMetadataBase({ GCE_METADATA_HOST: "10.0.0.2:8080" }).href, "http://10.0.0.2:8080/");
  assert.equal(gceMetadataBase({ GCE_METADATA_HOST: "http://localhost:9" }).href, "http://localhost:9/");
  assert.equal(
    gceMetadataBase({ GCE_METADATA_IP: "10.0.0.3", GCE_METADATA_HOST: "x" }).href,
    "http://10.0.0.3/",
  );
  assert.throws(
    () => gceMetadataBase({ GCE_METADATA_HOST: "http://[bad" }),
    (e: unknown) => e instanceof BootsealError && e.code === "USAGE",
  );
});

test(
  "fake metadata server: an instance without a service account is UNAUTHORIZED saying one is needed",
  T,
  async () => {
    const fake = await startGceMetadata(key, { ...EXAMPLE_INSTANCE, serviceAccount: undefined });
    try {
      await rejectsWith(
        gcpProvider().credential({ audience: AUDIENCE, env: { GCE_METADATA_HOST: fake.host } }),
        "UNAUTHORIZED",
        /service account attached/,
      );
    } finally {
      await fake.close();
    }
  },
);

test("no metadata server (refused, or no answer within the timeout) is KEY_UNAVAILABLE", T, async () => {
  const host = `127.0.0.1:${await freePort()}`;
  await rejectsWith(
    gcpProvider().credential({ audience: AUDIENCE, env: { GCE_METADATA_HOST: host } }),
    "KEY_UNAVAILABLE",
    /unreachable \(ECONNREFUSED\)/,
  );
  const silent = await stand(() => {
    // holds the request: never answers
  });
  try {
    const p = gcpProvider({ timeoutMs: 200 }).credential({
      audience: AUDIENCE,
      env: { GCE_METADATA_HOST: silent.host },
    });
    await rejectsWith(p, "KEY_UNAVAILABLE", /no answer within 200 ms/);
    const aborted = new AbortController();
    aborted.abort();
    const q = gcpProvider().credential({
      audience: AUDIENCE,
      env: { GCE_METADATA_HOST: silent.host },
      signal: aborted.signal,
    });
    await rejectsWith(q, "KEY_UNAVAILABLE", /unreachable/);
  } finally {
    await silent.close();
  }
});

test(
  "something else answering (no Metadata-Flavor), 5xx, or a body that is no JWT is KEY_UNAVAILABLE; 403 is UNAUTHORIZED",
  T,
  async () => {
    let answer: { status: number; flavor: boolean; body: string } = {
      status: 200,
      flavor: false,
      body: "a.b.c",
    };
    const other = await stand((_req, res) => {
      const headers: Record<string, string> = answer.flavor ? { "metadata-flavor": "Google" } : {};
      res.writeHead(answer.status, headers).end(answer.body);
    });
    const get = () =>
      gcpProvider().credential({ audience: AUDIENCE, env: { GCE_METADATA_HOST: other.host } });
    try {
      await rejectsWith(get(), "KEY_UNAVAILABLE", /lacks "Metadata-Flavor: Google"/);
      answer = { status: 503, flavor: true, body: "<html><b>Service Unavailable</b></html>" };
      await rejectsWith(get(), "KEY_UNAVAILABLE", /HTTP 503: Service Unavailable/);
      answer = { status: 200, flavor: true, body: "<html>captive portal</html>" };
      await rejectsWith(get(), "KEY_UNAVAILABLE", /not a JWT/);
      answer = { status: 200, flavor: true, body: "x".repeat(70_000) };
      await rejectsWith(get(), "KEY_UNAVAILABLE", /larger than/);
      answer = { status: 403, flavor: true, body: "Request denied" };
      await rejectsWith(get(), "UNAUTHORIZED", /refused the identity token \(HTTP 403: Request denied\)/);
    } finally {
      await other.close();
    }
  },
);
