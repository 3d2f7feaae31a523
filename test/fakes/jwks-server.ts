/**
 * FAKE issuer key endpoint: a local HTTP server publishing a JSON Web Key Set, as
 * https://www.googleapis.com/oauth2/v3/certs and
 * https://login.microsoftonline.com/{tenant}/discovery/v2.0/keys do (no real issuer can run
 * here). The keys are RSA pairs generated per test run; the fakes of the metadata servers
 * (gce-metadata.ts, azure-imds.ts) sign with them. The key list can change while it runs (key
 * rotation), it can answer an error status or never answer (JWKS down), and it counts requests.
 *
 * Shapes: Google publishes `{kty, alg: "RS256", use: "sig", kid, n, e}`; Microsoft publishes
 * `{kty, use: "sig", kid, x5t, n, e, x5c, issuer}` without `alg`. `x5c` is left out here (no
 * certificate is made; verifiers use `n`/`e`, as jose does).
 */
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose";

export interface TestKey {
  readonly kid: string;
  readonly privateKey: CryptoKey;
  readonly publicJwk: JWK;
}

/** A fresh RS256 key pair (2048-bit, as both clouds use). */
export async function makeTestKey(kid: string): Promise<TestKey> {
  const { privateKey, publicKey } = await generateKeyPair("RS256", { modulusLength: 2048 });
  return { kid, privateKey, publicJwk: await exportJWK(publicKey) };
}

/** Signs `payload` as is (claims are the caller's: no defaults added), RS256 with the key's kid. */
export function signJwt(
  key: TestKey,
  payload: JWTPayload,
  header: Record<string, unknown> = {},
): Promise<string> {
  return new SignJWT(payload)
    .setProtectedHeader({ alg: "RS256", kid: key.kid, typ: "JWT", ...header })
    .sign(key.privateKey);
}

export type JwksShape = "google" | "microsoft";

export interface JwksServer {
  readonly url: string;
  /** Requests answered or held so far. */
  readonly requests: number;
  setKeys(keys: readonly TestKey[]): void;
  /** Answer this status (with a small HTML body) instead of the keys; undefined: serve keys. */
  failWith(status: number | undefined): void;
  /** Accept requests and never answer them (until close). */
  hang(on: boolean): void;
  close(): Promise<void>;
}

export async function startJwksServer(
  keys: readonly TestKey[],
  options: { shape?: JwksShape; tenant?: string } = {},
): Promise<JwksServer> {
  const shape = options.shape ?? "google";
  let current = [...keys];
  let failure: number | undefined;
  let hanging = false;
  let requests = 0;
  const held: ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    requests += 1;
    if (hanging) {
      held.push(res);
      return;
    }
    if (failure !== undefined) {
      res.writeHead(failure, { "content-type": "text/html" }).end("<html><body>error</body></html>");
      return;
    }
    if (req.method !== "GET") {
      res.writeHead(405).end();
      return;
    }
    const body = { keys: current.map((k) => publish(k, shape, options.tenant)) };
    res.writeHead(200, {
      "content-type": "application/json; charset=utf-8",
      "cache-control": "public, max-age=3600",
    });
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const path = shape === "google" ? "/oauth2/v3/certs" : `/${options.tenant ?? "common"}/discovery/v2.0/keys`;
  return {
    url: `http://127.0.0.1:${port}${path}`,
    get requests() {
      return requests;
    },
    setKeys(next) {
      current = [...next];
    },
    failWith(status) {
      failure = status;
    },
    hang(on) {
      hanging = on;
    },
    close() {
      for (const res of held.splice(0)) res.destroy();
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function publish(key: TestKey, shape: JwksShape, tenant: string | undefined): Record<string, unknown> {
  const { n, e, kty } = key.publicJwk;
  if (shape === "google") return { kty, alg: "RS256", use: "sig", kid: key.kid, n, e };
  return {
    kty,
    use: "sig",
    kid: key.kid,
    x5t: key.kid,
    n,
    e,
    issuer: `https://login.microsoftonline.com/${tenant ?? "{tenantid}"}/v2.0`,
  };
}
