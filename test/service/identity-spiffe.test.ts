/**
 * The `spiffe` verifier against the spiffe peer: real go-spiffe code (its federation handler
 * serves the bundles, over https_web and https_spiffe), JWT-SVIDs signed with go-jose as SPIRE
 * signs them. Every refusal is checked against go-spiffe's own jwtsvid.ParseAndValidate too
 * (the oracle), except the two checks bootseal adds (one audience only, maxLifetime).
 */
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { UnsecuredJWT } from "jose";
import type { SpiffeTrustDomain } from "../../src/config/machine-auth-spiffe.ts";
import { spiffeVerifier } from "../../src/service/identity/spiffe.ts";
import { tempDir } from "../fetcher/helpers.ts";
import { peer } from "../helpers/peers.ts";
import { freePort } from "../helpers/ports.ts";
import {
  bundleOf,
  ENDPOINT_DOMAIN,
  ENDPOINT_ID,
  goSpiffeAccepts,
  mint,
  newDomain,
  retire,
  rotate,
  spiffeEndpoint,
  webEndpoint,
} from "../helpers/spiffe-issuer.ts";
import { rejectsWith, T } from "./identity-contract.ts";

const AUDIENCE = "https://bootseal.example.com";
const ctx = () => ({ audience: AUDIENCE, now: new Date() });

function web(td: string): SpiffeTrustDomain {
  return {
    name: td,
    source: { kind: "https_web", url: new URL(webEndpoint(td)), caFile: peer("SPIFFE_WEB_CA_FILE") },
  };
}

function verifier(domains: SpiffeTrustDomain[], over: { cooldownMs?: number; maxLifetimeMs?: number } = {}) {
  return spiffeVerifier({
    trustDomains: domains,
    maxLifetimeMs: over.maxLifetimeMs ?? 3600_000,
    timeoutMs: 5_000,
    cooldownMs: over.cooldownMs ?? 0,
    cacheMaxAgeMs: 600_000,
    clockSkewMs: 60_000,
  });
}

/** Refused by bootseal with this message, and by go-spiffe too. */
async function bothRefuse(v: ReturnType<typeof verifier>, token: string, text: RegExp, aud = AUDIENCE) {
  await rejectsWith(v.verify(token, ctx()), "UNAUTHORIZED", text, token);
  assert.equal(await goSpiffeAccepts(token, aud), false, "go-spiffe refuses it too");
}

test("https_web: a JWT-SVID for this audience proves its SPIFFE ID; go-spiffe agrees", T, async () => {
  const { td } = await newDomain("web");
  const v = verifier([web(td)]);
  const sub = `spiffe://${td}/node/web-1`;
  const token = await mint({ td, sub, aud: [AUDIENCE] });
  const id = await v.verify(token, ctx());
  assert.deepEqual(id, {
    method: "spiffe",
    principal: sub,
    attributes: { id: sub, trustDomain: td, path: "/node/web-1" },
  });
  assert.equal(await goSpiffeAccepts(token, AUDIENCE), true);
  // RSA keys too (the peer's domain rotated to RS256, then PS256).
  for (const alg of ["RS256", "PS256"]) {
    await rotate(td, alg);
    const t = await mint({ td, sub, aud: [AUDIENCE] });
    assert.equal((await v.verify(t, ctx())).principal, sub, alg);
  }
});

test(
  "https_spiffe: the endpoint's X509-SVID is checked against the bootstrap bundle and its SPIFFE ID",
  T,
  async () => {
    const spiffe = (endpointId: string): SpiffeTrustDomain => ({
      name: ENDPOINT_DOMAIN,
      source: {
        kind: "https_spiffe",
        url: new URL(spiffeEndpoint(ENDPOINT_DOMAIN)),
        endpointId,
        bootstrapBundleFile: peer("SPIFFE_BOOTSTRAP_BUNDLE"),
      },
    });
    const sub = `spiffe://${ENDPOINT_DOMAIN}/node/web-1`;
    const token = await mint({ td: ENDPOINT_DOMAIN, sub, aud: [AUDIENCE] });
    assert.equal((await verifier([spiffe(ENDPOINT_ID)]).verify(token, ctx())).principal, sub);
    // Another SPIFFE ID expected: the endpoint is not trusted, nothing is fetched.
    await rejectsWith(
      verifier([spiffe(`spiffe://${ENDPOINT_DOMAIN}/another-endpoint`)]).verify(token, ctx()),
      "KEY_UNAVAILABLE",
      /cannot get it from .*X509-SVID is not spiffe:\/\/bootseal\.test\/another-endpoint/,
    );
    // The https_web profile against the same endpoint: its X509-SVID is no Web PKI certificate.
    const asWeb: SpiffeTrustDomain = {
      name: ENDPOINT_DOMAIN,
      source: {
        kind: "https_web",
        url: new URL(spiffeEndpoint(ENDPOINT_DOMAIN)),
        caFile: peer("SPIFFE_WEB_CA_FILE"),
      },
    };
    await rejectsWith(verifier([asWeb]).verify(token, ctx()), "KEY_UNAVAILABLE", /cannot get it from/);
  },
);

test("a bundle file: read at each refresh; an absent file is KEY_UNAVAILABLE", T, async () => {
  const dir = await tempDir("spiffe-bundle");
  try {
    const { td } = await newDomain("file");
    const path = join(dir.path, "bundle.json");
    const v = verifier([{ name: td, source: { kind: "file", path } }]);
    const sub = `spiffe://${td}/node/db-1`;
    const token = await mint({ td, sub, aud: [AUDIENCE] });
    await rejectsWith(v.verify(token, ctx()), "KEY_UNAVAILABLE", /cannot read .*bundle\.json \(ENOENT\)/);
    await writeFile(path, await bundleOf(td));
    assert.equal((await v.verify(token, ctx())).attributes.path, "/node/db-1");
  } finally {
    await dir.remove();
  }
});

test("wrong audience, several audiences, expired, too long-lived: UNAUTHORIZED", T, async () => {
  const { td } = await newDomain("claims");
  const v = verifier([web(td)], { maxLifetimeMs: 600_000 });
  const sub = `spiffe://${td}/node/web-1`;
  await bothRefuse(
    v,
    await mint({ td, sub, aud: ["https://another.example.com"] }),
    /claim "aud" does not verify/,
  );
  await bothRefuse(v, await mint({ td, sub, aud: [AUDIENCE], iatOffset: -900, ttl: 300 }), /expired/);
  // go-spiffe accepts a token for several audiences; bootseal does not (replayable by each).
  const two = await mint({ td, sub, aud: [AUDIENCE, "https://another.example.com"] });
  await rejectsWith(v.verify(two, ctx()), "UNAUTHORIZED", /more than one audience/, two);
  const longLived = await mint({ td, sub, aud: [AUDIENCE], ttl: 7200 });
  await rejectsWith(
    v.verify(longLived, ctx()),
    "UNAUTHORIZED",
    /longer than machineAuth\.spiffe\.maxLifetime/,
    longLived,
  );
});

test("alg none, an unknown key, a sub that is no SPIFFE ID, a bad typ: UNAUTHORIZED", T, async () => {
  const { td } = await newDomain("attacks");
  const v = verifier([web(td)]);
  const sub = `spiffe://${td}/node/web-1`;
  const now = Math.floor(Date.now() / 1000);
  const none = new UnsecuredJWT({ sub, aud: AUDIENCE, iat: now, exp: now + 300 }).encode();
  await bothRefuse(v, none, /signing algorithm not accepted/);
  await bothRefuse(
    v,
    await mint({ td, sub, aud: [AUDIENCE], key: "stranger" }),
    /a key the issuer does not publish/,
  );
  await bothRefuse(
    v,
    await mint({ td, sub: "https://not-spiffe.example/x", aud: [AUDIENCE] }),
    /not a SPIFFE ID/,
  );
  await bothRefuse(
    v,
    await mint({ td, sub, aud: [AUDIENCE], typ: "at+jwt" }),
    /"typ" is neither JWT nor JOSE/,
  );
});

test("wrong trust domain: a sub outside the trusted domains is refused, whoever signed it", T, async () => {
  const trusted = await newDomain("trusted");
  const other = await newDomain("other");
  const v = verifier([web(trusted.td)]);
  // Signed by the other domain's own key (go-spiffe, knowing both bundles, accepts it).
  const foreign = await mint({ td: other.td, sub: `spiffe://${other.td}/node/web-1`, aud: [AUDIENCE] });
  await rejectsWith(v.verify(foreign, ctx()), "UNAUTHORIZED", /trust domain is not one of/, foreign);
  // Signed by the trusted domain's key but naming another domain: that key vouches for its own only.
  const crossed = await mint({ td: trusted.td, sub: `spiffe://${other.td}/node/web-1`, aud: [AUDIENCE] });
  await bothRefuse(v, crossed, /trust domain is not one of/);
  // Both trusted: the other domain's key cannot sign for the first one either.
  const both = verifier([web(trusted.td), web(other.td)]);
  const impostor = await mint({ td: other.td, sub: `spiffe://${trusted.td}/node/web-1`, aud: [AUDIENCE] });
  await rejectsWith(both.verify(impostor, ctx()), "UNAUTHORIZED", /does not publish/, impostor);
  assert.equal(await goSpiffeAccepts(impostor, AUDIENCE), false);
});

test(
  "key rotation at the bundle endpoint: the new key is accepted after a refresh, the old one is gone after the next",
  T,
  async () => {
    const { td, kid: oldKid } = await newDomain("rotation");
    const v = verifier([web(td)]);
    const sub = `spiffe://${td}/node/web-1`;
    const oldToken = await mint({ td, sub, aud: [AUDIENCE] });
    assert.equal((await v.verify(oldToken, ctx())).principal, sub);
    // A new key: its kid is not in the cached bundle, so the verifier refetches (cooldown 0).
    await rotate(td);
    const newToken = await mint({ td, sub, aud: [AUDIENCE] });
    assert.equal((await v.verify(newToken, ctx())).principal, sub);
    assert.equal(
      (await v.verify(oldToken, ctx())).principal,
      sub,
      "both keys are published during the overlap",
    );
    // The old key leaves the bundle; after the bundle's refresh hint (2 s) the verifier drops it.
    await retire(td, oldKid);
    await sleep(2_500);
    await bothRefuse(v, oldToken, /a key the issuer does not publish/);
    assert.equal((await v.verify(newToken, ctx())).principal, sub);
  },
);

test("an unknown kid refetches the bundle at most once per cooldown", T, async () => {
  const { td } = await newDomain("cooldown");
  const v = verifier([web(td)], { cooldownMs: 3600_000 });
  const sub = `spiffe://${td}/node/web-1`;
  await v.verify(await mint({ td, sub, aud: [AUDIENCE] }), ctx());
  await rotate(td);
  // Within the cooldown (and the 2 s refresh hint) the new key is not fetched yet.
  const fresh = await mint({ td, sub, aud: [AUDIENCE] });
  await rejectsWith(v.verify(fresh, ctx()), "UNAUTHORIZED", /does not publish/, fresh);
});

test(
  "the bundle endpoint down: KEY_UNAVAILABLE (the service answers 503, the machine retries)",
  T,
  async () => {
    const closed = `https://127.0.0.1:${await freePort()}/down.test`;
    const down = verifier([{ name: "down.test", source: { kind: "https_web", url: new URL(closed) } }]);
    const { td } = await newDomain("down");
    const signed = await mint({ td, sub: "spiffe://down.test/node/web-1", aud: [AUDIENCE] });
    await rejectsWith(
      down.verify(signed, ctx()),
      "KEY_UNAVAILABLE",
      /trust bundle of down\.test: cannot get it from/,
    );
  },
);
