/**
 * What every cloud identity provider (machine side, src/fetcher/identity/<method>.ts) meets,
 * run per cloud by identity-gcp.test.ts and identity-azure.test.ts against the cloud's FAKE
 * metadata endpoint (test/fakes/gce-metadata.ts, azure-imds.ts): it asks for a token for the
 * audience with the header the endpoint requires (and the fake refuses one without it, so
 * that check means something), the token verifies with the service's verifier, and no
 * endpoint (refused, or silent past the timeout) is KEY_UNAVAILABLE.
 */
import assert from "node:assert/strict";
import { createServer, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import type { IdentityProvider } from "../../src/fetcher/identity/provider.ts";
import type { ProvenIdentity } from "../../src/service/identity/verifier.ts";
import { type JwksServer, makeTestKey, startJwksServer, type TestKey } from "../fakes/jwks-server.ts";
import { freePort } from "../helpers/ports.ts";
import { rejectsWith, T } from "../service/identity-contract.ts";

export { rejectsWith, T };

/** A plain local HTTP server standing where the metadata endpoint should be. */
export async function stand(handler: RequestListener): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A cloud's fake metadata endpoint. */
export interface ProviderFake<Request> {
  readonly requests: readonly Request[];
  close(): Promise<void>;
}

/** One cloud's provider, as the contract drives it. */
export interface ProviderCase<Request, Fake extends ProviderFake<Request>> {
  readonly audience: string;
  readonly kid: string;
  readonly jwks: Parameters<typeof startJwksServer>[1];
  provider(options?: { timeoutMs?: number }): IdentityProvider;
  startFake(key: TestKey): Promise<Fake>;
  /** The environment pointing the provider at the fake. */
  envFor(fake: Fake): Record<string, string>;
  /** The environment pointing the provider at 127.0.0.1:`port`. */
  envAt(port: number): Record<string, string>;
  /** The service's verifier of a token signed by the fake, for `audience`. */
  verify(token: string, jwksUrl: string): Promise<ProvenIdentity>;
  readonly asked: {
    readonly title: string;
    /** The one request the provider made. */
    check(request: Request): void;
    checkIdentity(id: ProvenIdentity): void;
  };
  readonly headerless: {
    readonly title: string;
    /** A request to the fake without the header it requires. */
    send(fake: Fake): Promise<Response>;
    readonly status: number;
    readonly text: RegExp;
  };
  /** The title of the "no endpoint" case. */
  readonly unreachableTitle: string;
}

/** The contract's key and JWKS, for a cloud's own cases (set once `before` ran). */
export interface ProviderFixture {
  readonly key: TestKey;
  readonly jwks: JwksServer;
}

export function identityProviderContract<Request, Fake extends ProviderFake<Request>>(
  cloud: ProviderCase<Request, Fake>,
): ProviderFixture {
  let key: TestKey;
  let jwks: JwksServer;
  before(async () => {
    key = await makeTestKey(cloud.kid);
    jwks = await startJwksServer([key], cloud.jwks);
  });
  after(() => jwks.close());

  test(cloud.asked.title, T, async () => {
    const fake = await cloud.startFake(key);
    try {
      const token = await cloud.provider().credential({ audience: cloud.audience, env: cloud.envFor(fake) });
      assert.equal(fake.requests.length, 1);
      const request = fake.requests[0];
      assert.ok(request);
      cloud.asked.check(request);
      // The service's verifier accepts it: the two sides agree on the wire shape.
      cloud.asked.checkIdentity(await cloud.verify(token, jwks.url));
    } finally {
      await fake.close();
    }
  });

  test(cloud.headerless.title, T, async () => {
    const fake = await cloud.startFake(key);
    try {
      const res = await cloud.headerless.send(fake);
      assert.equal(res.status, cloud.headerless.status);
      assert.match(await res.text(), cloud.headerless.text);
    } finally {
      await fake.close();
    }
  });

  test(cloud.unreachableTitle, T, async () => {
    await rejectsWith(
      cloud.provider().credential({ audience: cloud.audience, env: cloud.envAt(await freePort()) }),
      "KEY_UNAVAILABLE",
      /unreachable \(ECONNREFUSED\)/,
    );
    const silent = await stand(() => {
      // holds the request: never answers
    });
    try {
      const p = cloud
        .provider({ timeoutMs: 200 })
        .credential({ audience: cloud.audience, env: cloud.envAt(silent.port) });
      await rejectsWith(p, "KEY_UNAVAILABLE", /no answer within 200 ms/);
    } finally {
      await silent.close();
    }
  });

  return {
    get key() {
      return key;
    },
    get jwks() {
      return jwks;
    },
  };
}
