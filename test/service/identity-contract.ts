/**
 * What every JWT identity verifier (src/service/identity/gcp.ts, azure.ts, over jwt-common.ts)
 * meets, run per cloud by identity-gcp.test.ts and identity-azure.test.ts against a FAKE
 * issuer: locally generated RSA keys published by a fake JWKS endpoint
 * (test/fakes/jwks-server.ts) in the cloud's key shape. A key the issuer does not publish,
 * `alg: none`, HS256 keyed with the public key and a tampered payload are UNAUTHORIZED; the
 * keys' endpoint refused, failing or silent is KEY_UNAVAILABLE; a newly published key id
 * causes one refetch.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type JWTPayload, SignJWT, UnsecuredJWT } from "jose";
import { BootsealError } from "../../src/errors.ts";
import type { IdentityVerifier, ProvenIdentity, VerifyContext } from "../../src/service/identity/verifier.ts";
import {
  type JwksServer,
  makeTestKey,
  signJwt,
  startJwksServer,
  type TestKey,
} from "../fakes/jwks-server.ts";
import { freePort } from "../helpers/ports.ts";

export const T = { timeout: 60_000 };

/** Rejects with a BootsealError of `code` whose message matches `text` and holds no part of `credential`. */
export async function rejectsWith(
  p: Promise<unknown>,
  code: string,
  text: RegExp,
  credential?: string,
): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof BootsealError, `a BootsealError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    assert.match(err.message, text);
    if (credential) {
      for (const part of credential.split(".")) {
        if (part.length > 8) assert.ok(!err.message.includes(part), "the message holds no part of the token");
      }
    }
    return true;
  });
}

/** One cloud's verifier, as the contract drives it. */
export interface JwtVerifierCase {
  readonly audience: string;
  /** The key ids of the issuer's key, a second key it publishes later, and a stranger's. */
  readonly kids: readonly [string, string, string];
  readonly jwks: Parameters<typeof startJwksServer>[1];
  /** The verifier of these JWKS (no refetch cooldown unless given). */
  verifier(jwksUrl: string, over?: { timeoutMs?: number }): IdentityVerifier;
  /** A valid token under `key`, from the cloud's fake metadata endpoint. */
  token(key: TestKey): Promise<string>;
  /** A valid claim set, to sign here. */
  claims(): JWTPayload;
  /** The payload of a valid token changed to name another machine (its signature then fails). */
  tamper(payload: Record<string, unknown>): void;
  /** The status the failing JWKS answers in the "JWKS down" case. */
  readonly failStatus: number;
  /** What the identity proven after a key rotation shows. */
  checkRotated(id: ProvenIdentity): void;
}

/** The contract's keys and issuer, for a cloud's own cases (set once `before` ran). */
export interface VerifierFixture {
  readonly keyA: TestKey;
  readonly keyB: TestKey;
  readonly stranger: TestKey;
  readonly jwks: JwksServer;
  ctx(over?: Partial<VerifyContext>): VerifyContext;
}

export function jwtVerifierContract(cloud: JwtVerifierCase): VerifierFixture {
  let keyA: TestKey;
  let keyB: TestKey;
  let stranger: TestKey;
  let jwks: JwksServer;
  before(async () => {
    const [a, b, x] = cloud.kids;
    [keyA, keyB, stranger] = await Promise.all([makeTestKey(a), makeTestKey(b), makeTestKey(x)]);
    jwks = await startJwksServer([keyA], cloud.jwks);
  });
  after(() => jwks.close());
  const ctx = (over: Partial<VerifyContext> = {}): VerifyContext => ({
    audience: cloud.audience,
    now: new Date(),
    ...over,
  });

  test(
    "a key not in the JWKS, alg none, HS256 with the public key, a tampered payload: UNAUTHORIZED",
    T,
    async () => {
      const v = cloud.verifier(jwks.url);
      const unknown = await signJwt(stranger, cloud.claims());
      await rejectsWith(v.verify(unknown, ctx()), "UNAUTHORIZED", /key the issuer does not publish/, unknown);
      const none = new UnsecuredJWT(cloud.claims()).encode();
      await rejectsWith(v.verify(none, ctx()), "UNAUTHORIZED", /algorithm not accepted/);
      const secret = new TextEncoder().encode(JSON.stringify(keyA.publicJwk));
      const hs = await new SignJWT(cloud.claims())
        .setProtectedHeader({ alg: "HS256", kid: keyA.kid })
        .sign(secret);
      await rejectsWith(v.verify(hs, ctx()), "UNAUTHORIZED", /algorithm not accepted/, hs);
      const [h, p, s] = (await cloud.token(keyA)).split(".") as [string, string, string];
      const payload = JSON.parse(Buffer.from(p, "base64url").toString()) as Record<string, unknown>;
      cloud.tamper(payload);
      const forged = `${h}.${Buffer.from(JSON.stringify(payload)).toString("base64url")}.${s}`;
      await rejectsWith(v.verify(forged, ctx()), "UNAUTHORIZED", /signature does not verify/, forged);
    },
  );

  test(
    `JWKS down (refused, HTTP ${cloud.failStatus}, no answer within the timeout) is KEY_UNAVAILABLE`,
    T,
    async () => {
      const token = await cloud.token(keyA);
      const refused = cloud.verifier(`http://127.0.0.1:${await freePort()}/keys`);
      await rejectsWith(
        refused.verify(token, ctx()),
        "KEY_UNAVAILABLE",
        /cannot get the signing keys .*\(ECONNREFUSED\)/,
        token,
      );
      const down = await startJwksServer([keyA], cloud.jwks);
      try {
        down.failWith(cloud.failStatus);
        await rejectsWith(
          cloud.verifier(down.url).verify(token, ctx()),
          "KEY_UNAVAILABLE",
          /signing keys/,
          token,
        );
        down.failWith(undefined);
        down.hang(true);
        const slow = cloud.verifier(down.url, { timeoutMs: 200 });
        await rejectsWith(slow.verify(token, ctx()), "KEY_UNAVAILABLE", /no answer within 200 ms/, token);
      } finally {
        await down.close();
      }
    },
  );

  test("key rotation: a token under a newly published kid refetches once and verifies", T, async () => {
    const server = await startJwksServer([keyA], cloud.jwks);
    try {
      const v = cloud.verifier(server.url);
      await v.verify(await cloud.token(keyA), ctx());
      assert.equal(server.requests, 1);
      await v.verify(await cloud.token(keyA), ctx());
      assert.equal(server.requests, 1, "known keys come from the cache");
      server.setKeys([keyB, keyA]);
      cloud.checkRotated(await v.verify(await cloud.token(keyB), ctx()));
      assert.equal(server.requests, 2, "the unknown kid caused one refetch");
    } finally {
      await server.close();
    }
  });

  return {
    get keyA() {
      return keyA;
    },
    get keyB() {
      return keyB;
    },
    get stranger() {
      return stranger;
    },
    get jwks() {
      return jwks;
    },
    ctx,
  };
}
