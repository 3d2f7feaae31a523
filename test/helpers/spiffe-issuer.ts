/**
 * The spiffe peer (scripts/peers/spiffe.sh: a bundle endpoint and JWT-SVID issuer built on
 * go-spiffe, not SPIRE), driven through its control API: trust domains, JWT-SVIDs, key
 * rotation, and go-spiffe's own verdict on a token (jwtsvid.ParseAndValidate).
 */
import { peer, uniqueName } from "./peers.ts";

/** The trust domain whose X509-SVID the https_spiffe listener presents. */
export const ENDPOINT_DOMAIN = "bootseal.test";
export const ENDPOINT_ID = "spiffe://bootseal.test/bundle-endpoint";

async function control<T>(path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${peer("SPIFFE_CONTROL")}${path}`, {
    method: body === undefined ? "GET" : "POST",
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`spiffe peer ${path}: HTTP ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}

export interface MintRequest {
  readonly td: string;
  readonly sub: string;
  readonly aud: readonly string[];
  /** Seconds from iat to exp (default 300). */
  readonly ttl?: number;
  /** Seconds added to now for iat (negative: issued in the past). */
  readonly iatOffset?: number;
  /** "stranger": signed with a key no bundle holds. */
  readonly key?: "stranger";
  readonly typ?: string;
}

/** A fresh trust domain of its own (tests that rotate keys never share one). */
export async function newDomain(prefix: string, alg = "ES256"): Promise<{ td: string; kid: string }> {
  const td = `${uniqueName(prefix)}.test`;
  const { kid } = await control<{ kid: string }>("/domain", { td, alg });
  return { td, kid };
}

export async function mint(req: MintRequest): Promise<string> {
  return (await control<{ token: string }>("/mint", req)).token;
}

export async function rotate(td: string, alg = "ES256"): Promise<string> {
  return (await control<{ kid: string }>("/rotate", { td, alg })).kid;
}

export async function retire(td: string, kid: string): Promise<void> {
  await control("/retire", { td, kid });
}

/** The bundle document, exactly as the bundle endpoint serves it. */
export async function bundleOf(td: string): Promise<string> {
  const res = await fetch(`${peer("SPIFFE_CONTROL")}/bundle?td=${encodeURIComponent(td)}`);
  if (!res.ok) throw new Error(`spiffe peer /bundle: HTTP ${res.status}`);
  return res.text();
}

/** go-spiffe's verdict: jwtsvid.ParseAndValidate against every bundle the peer holds. */
export async function goSpiffeAccepts(token: string, aud: string): Promise<boolean> {
  return (await control<{ ok: boolean }>("/validate", { token, aud: [aud] })).ok;
}

/** The https_web bundle endpoint URL of a trust domain. */
export function webEndpoint(td: string): string {
  return `${peer("SPIFFE_WEB_ENDPOINT")}/${td}`;
}

/** The https_spiffe bundle endpoint URL of a trust domain. */
export function spiffeEndpoint(td: string): string {
  return `${peer("SPIFFE_TLS_ENDPOINT")}/${td}`;
}
