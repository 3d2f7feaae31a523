/**
 * The `gcp` verifier against a FAKE Google: locally generated RSA keys published by a fake
 * JWKS endpoint (test/fakes/jwks-server.ts), tokens minted by the fake metadata server
 * (test/fakes/gce-metadata.ts) in Google's claim shape, or signed here for the broken cases.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { GCP_MACHINE_AUTH_SCHEMA } from "../../src/config/machine-auth-jwt.ts";
import { schemaChecker } from "../../src/config/schema-check.ts";
import { BootsealError } from "../../src/errors.ts";
import { gcpVerifier, gcpVerifierFromConfig } from "../../src/service/identity/gcp.ts";
import { EXAMPLE_INSTANCE, IDENTITY_PATH, startGceMetadata } from "../fakes/gce-metadata.ts";
import { signJwt, startJwksServer, type TestKey } from "../fakes/jwks-server.ts";
import { jwtVerifierContract, rejectsWith, T } from "./identity-contract.ts";

const AUDIENCE = "https://bootseal.example.com";

/** A token from the fake metadata server, over its real wire protocol. */
async function metadataToken(
  key: TestKey,
  format: "full" | "standard" = "full",
  audience = AUDIENCE,
): Promise<string> {
  const server = await startGceMetadata(key);
  try {
    const url = `http://${server.host}${IDENTITY_PATH}?audience=${encodeURIComponent(audience)}&format=${format}`;
    const res = await fetch(url, { headers: { "Metadata-Flavor": "Google" } });
    assert.equal(res.status, 200);
    return await res.text();
  } finally {
    await server.close();
  }
}

/** Google's full claim set, signed here so a test can change one claim. */
function fullClaims(over: JWTPayload = {}): JWTPayload {
  const iat = Math.floor(Date.now() / 1000);
  return {
    aud: AUDIENCE,
    azp: "110987294251917851298",
    email: "716149158341-compute@developer.gserviceaccount.com",
    email_verified: true,
    exp: iat + 3600,
    google: {
      compute_engine: {
        instance_creation_timestamp: 1_790_000_000,
        instance_id: "4340508760561261530",
        instance_name: "web-1",
        project_id: "bootseal-test-1",
        project_number: 716149158341,
        zone: "europe-west1-b",
      },
    },
    iat,
    iss: "https://accounts.google.com",
    sub: "110987294251917851298",
    ...over,
  };
}

const gcp = jwtVerifierContract({
  audience: AUDIENCE,
  kids: ["kid-a", "kid-b", "kid-x"],
  jwks: { shape: "google" },
  verifier: (jwksUrl, over = {}) => gcpVerifier({ jwksUrl, cooldownMs: 0, ...over }),
  token: (key) => metadataToken(key),
  claims: () => fullClaims(),
  tamper(payload) {
    (payload as { google: { compute_engine: Record<string, unknown> } }).google.compute_engine.instance_name =
      "db-1";
  },
  failStatus: 500,
  checkRotated: (id) => assert.equal(id.attributes.instanceId, "4340508760561261530"),
});
const ctx = gcp.ctx;

test(
  "valid: a format=full token from the fake metadata server gives the instance's attributes",
  T,
  async () => {
    const v = gcpVerifier({ jwksUrl: gcp.jwks.url, cooldownMs: 0 });
    const id = await v.verify(await metadataToken(gcp.keyA), ctx());
    assert.equal(id.method, "gcp");
    assert.equal(id.principal, "projects/bootseal-test-1/zones/europe-west1-b/instances/web-1");
    assert.deepEqual(id.attributes, {
      project: EXAMPLE_INSTANCE.projectId,
      projectNumber: String(EXAMPLE_INSTANCE.projectNumber),
      zone: EXAMPLE_INSTANCE.zone,
      instanceName: EXAMPLE_INSTANCE.instanceName,
      instanceId: EXAMPLE_INSTANCE.instanceId,
    });
  },
);

test(
  "valid: the issuer without https:// (Google's other form) is accepted, another issuer is not",
  T,
  async () => {
    const v = gcpVerifier({ jwksUrl: gcp.jwks.url, cooldownMs: 0 });
    const id = await v.verify(await signJwt(gcp.keyA, fullClaims({ iss: "accounts.google.com" })), ctx());
    assert.equal(id.attributes.instanceName, "web-1");
    const other = await signJwt(gcp.keyA, fullClaims({ iss: "https://accounts.example.com" }));
    await rejectsWith(v.verify(other, ctx()), "UNAUTHORIZED", /claim "iss"/, other);
  },
);

test(
  "a format=standard token (no google.compute_engine) is 401 saying format=full is needed",
  T,
  async () => {
    const v = gcpVerifier({ jwksUrl: gcp.jwks.url, cooldownMs: 0 });
    const token = await metadataToken(gcp.keyA, "standard");
    await rejectsWith(v.verify(token, ctx()), "UNAUTHORIZED", /format=full/, token);
  },
);

test(
  "wrong audience, several audiences, expired, not yet valid, from the future: UNAUTHORIZED",
  T,
  async () => {
    const v = gcpVerifier({ jwksUrl: gcp.jwks.url, cooldownMs: 0 });
    const wrongAud = await metadataToken(gcp.keyA, "full", "https://other.example.com");
    await rejectsWith(v.verify(wrongAud, ctx()), "UNAUTHORIZED", /claim "aud"/, wrongAud);
    const twoAud = await signJwt(gcp.keyA, fullClaims({ aud: [AUDIENCE, "https://other.example.com"] }));
    await rejectsWith(v.verify(twoAud, ctx()), "UNAUTHORIZED", /more than one audience/, twoAud);
    const fresh = await metadataToken(gcp.keyA);
    const later = new Date(Date.now() + 2 * 3600_000);
    await rejectsWith(v.verify(fresh, ctx({ now: later })), "UNAUTHORIZED", /expired/, fresh);
    // Within the default 60 s skew an hour-old token still passes; beyond it, not.
    const nearlyExpired = new Date(Date.now() + 3600_000 + 30_000);
    assert.equal((await v.verify(fresh, ctx({ now: nearlyExpired }))).attributes.zone, "europe-west1-b");
    const iat = Math.floor(Date.now() / 1000);
    const future = await signJwt(gcp.keyA, fullClaims({ iat: iat + 600, exp: iat + 4200 }));
    await rejectsWith(v.verify(future, ctx()), "UNAUTHORIZED", /claim "iat"/, future);
    const notBefore = await signJwt(gcp.keyA, fullClaims({ nbf: iat + 600 }));
    await rejectsWith(v.verify(notBefore, ctx()), "UNAUTHORIZED", /claim "nbf"/, notBefore);
    const longLived = await signJwt(gcp.keyA, fullClaims({ iat: iat - 7200, exp: iat + 3600 }));
    await rejectsWith(v.verify(longLived, ctx()), "UNAUTHORIZED", /token lifetime/, longLived);
    const noIat = await signJwt(gcp.keyA, fullClaims({ iat: undefined }));
    await rejectsWith(v.verify(noIat, ctx()), "UNAUTHORIZED", /claim "iat" is missing/, noIat);
  },
);

test("a known kid signed with another key (an impostor) is UNAUTHORIZED", T, async () => {
  const v = gcpVerifier({ jwksUrl: gcp.jwks.url, cooldownMs: 0 });
  const impostor = await signJwt({ ...gcp.stranger, kid: gcp.keyA.kid }, fullClaims());
  await rejectsWith(v.verify(impostor, ctx()), "UNAUTHORIZED", /signature does not verify/, impostor);
});

test("RS512 (algorithm confusion the other way: RS256 only) is UNAUTHORIZED", T, async () => {
  const v = gcpVerifier({ jwksUrl: gcp.jwks.url, cooldownMs: 0 });
  const { privateKey: rs512Key } = await generateKeyPair("RS512", { modulusLength: 2048 });
  const rs512 = await new SignJWT(fullClaims())
    .setProtectedHeader({ alg: "RS512", kid: gcp.keyA.kid })
    .sign(rs512Key);
  await rejectsWith(v.verify(rs512, ctx()), "UNAUTHORIZED", /RS256 only/, rs512);
});

test("not a JWT, a JWT too long, a malformed google.compute_engine.zone: UNAUTHORIZED", T, async () => {
  const v = gcpVerifier({ jwksUrl: gcp.jwks.url, cooldownMs: 0 });
  await rejectsWith(v.verify("not.a.jwt", ctx()), "UNAUTHORIZED", /not a valid signed JWT/);
  await rejectsWith(v.verify("x".repeat(20_000), ctx()), "UNAUTHORIZED", /longer than/);
  const engine = (fullClaims().google as { compute_engine: Record<string, unknown> }).compute_engine;
  const slash = await signJwt(
    gcp.keyA,
    fullClaims({ google: { compute_engine: { ...engine, zone: "a/b" } } }),
  );
  await rejectsWith(
    v.verify(slash, ctx()),
    "UNAUTHORIZED",
    /"google\.compute_engine\.zone" is malformed/,
    slash,
  );
});

test(
  "key rotation: within the cooldown an unknown kid causes no fetch (refetches are bounded)",
  T,
  async () => {
    // An attacker cannot make us hammer the issuer.
    const bounded = await startJwksServer([gcp.keyA]);
    try {
      const cool = gcpVerifier({ jwksUrl: bounded.url, cooldownMs: 3600_000 });
      await cool.verify(await signJwt(gcp.keyA, fullClaims()), ctx());
      for (let i = 0; i < 5; i++) {
        const t = await signJwt({ ...gcp.stranger, kid: `random-${i}` }, fullClaims());
        await rejectsWith(cool.verify(t, ctx()), "UNAUTHORIZED", /does not publish/);
      }
      assert.equal(bounded.requests, 1);
    } finally {
      await bounded.close();
    }
  },
);

test(
  "machineAuth.gcp: the config fragment's durations reach the verifier; a bad one is USAGE",
  T,
  async () => {
    const check = schemaChecker(GCP_MACHINE_AUTH_SCHEMA);
    assert.deepEqual(check({}), {
      jwksUrl: "https://www.googleapis.com/oauth2/v3/certs",
      issuer: "https://accounts.google.com",
      timeout: "5s",
      cooldown: "30s",
      cacheMaxAge: "10m",
      clockSkew: "60s",
    });
    assert.throws(
      () => check({ jwksUrl: "file:///etc/keys" }),
      (e: unknown) => e instanceof BootsealError && e.code === "USAGE",
    );
    assert.throws(
      () => check({ jwks: "x" }),
      (e: unknown) => e instanceof BootsealError && e.code === "USAGE",
    );
    const v = gcpVerifierFromConfig({ jwksUrl: gcp.jwks.url, timeout: "2s", cooldown: 0, clockSkew: "10s" });
    const fresh = await metadataToken(gcp.keyA);
    const justPast = new Date(Date.now() + 3600_000 + 30_000);
    await rejectsWith(v.verify(fresh, ctx({ now: justPast })), "UNAUTHORIZED", /expired/, fresh);
    assert.throws(
      () => gcpVerifierFromConfig({ timeout: "soon" }),
      (e: unknown) =>
        e instanceof BootsealError && e.code === "USAGE" && /machineAuth\.gcp\.timeout/.test(e.message),
    );
    assert.throws(
      () => gcpVerifierFromConfig({ clockSkew: "1h" }),
      (e: unknown) => e instanceof BootsealError && e.code === "USAGE",
    );
    assert.throws(
      () => gcpVerifier({ jwksUrl: "ftp://x/keys" }),
      (e: unknown) => e instanceof BootsealError && e.code === "USAGE",
    );
  },
);
