/**
 * The `gcp` provider (machine side) against the FAKE Compute Engine metadata server
 * (test/fakes/gce-metadata.ts): what it asks for, with which headers, and how each failure of
 * the metadata server reads; the token it gets verifies with the service's verifier.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { BootsealError } from "../../src/errors.ts";
import { gceMetadataBase, gcpProvider } from "../../src/fetcher/identity/gcp.ts";
import { gcpVerifier } from "../../src/service/identity/gcp.ts";
import {
  EXAMPLE_INSTANCE,
  IDENTITY_PATH,
  type RecordedRequest,
  startGceMetadata,
} from "../fakes/gce-metadata.ts";
import { identityProviderContract, rejectsWith, stand, T } from "./identity-contract.ts";

const AUDIENCE = "https://bootseal.example.com:8443";
const envAt = (port: number) => ({ GCE_METADATA_HOST: `127.0.0.1:${port}` });

const gcp = identityProviderContract({
  audience: AUDIENCE,
  kid: "gce-kid-1",
  jwks: {},
  provider: (options) => gcpProvider(options),
  startFake: (key) => startGceMetadata(key),
  envFor: (fake) => ({ GCE_METADATA_HOST: fake.host }),
  envAt,
  verify: (token, jwksUrl) => gcpVerifier({ jwksUrl }).verify(token, { audience: AUDIENCE, now: new Date() }),
  asked: {
    title:
      "fake metadata server: the provider asks for a format=full token for the audience, with Metadata-Flavor: Google",
    check(req: RecordedRequest) {
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
    },
    checkIdentity(id) {
      assert.equal(id.attributes.instanceName, EXAMPLE_INSTANCE.instanceName);
      assert.equal(id.attributes.projectNumber, String(EXAMPLE_INSTANCE.projectNumber));
    },
  },
  headerless: {
    title:
      "fake metadata server refuses a request without Metadata-Flavor (so the header test above means something)",
    send: (fake) => fetch(`http://${fake.host}${IDENTITY_PATH}?audience=x&format=full`),
    status: 403,
    text: /Missing Metadata-Flavor:Google header/,
  },
  unreachableTitle: "no metadata server (refused, or no answer within the timeout) is KEY_UNAVAILABLE",
});

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
    const fake = await startGceMetadata(gcp.key, { ...EXAMPLE_INSTANCE, serviceAccount: undefined });
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

test("an aborted call to the metadata server is KEY_UNAVAILABLE", T, async () => {
  const silent = await stand(() => {
    // holds the request: never answers
  });
  try {
    const aborted = new AbortController();
    aborted.abort();
    const q = gcpProvider().credential({
      audience: AUDIENCE,
      env: envAt(silent.port),
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
    const get = () => gcpProvider().credential({ audience: AUDIENCE, env: envAt(other.port) });
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
