/**
 * The `spiffe` login method, service side: a JWT-SVID (SPIFFE JWT-SVID spec) whose audience is
 * this service, verified against the trust bundle of the trust domain its `sub` names
 * (spiffe-bundles.ts: a bundle endpoint or a file per configured trust domain). It proves the
 * workload's SPIFFE ID as its SPIFFE issuer (SPIRE or another) attested it; bindings match on
 * the id, its trust domain and its path. docs/security.md "Machine identity: SPIFFE".
 *
 * As go-spiffe's jwtsvid.ParseAndValidate: the bundle is chosen by the `sub`'s trust domain
 * (read before the signature is checked, only to choose), `kid` is required, `typ` if present
 * is `JWT` or `JOSE`, the algorithms are the spec's RS/ES/PS 256-512. Stricter: exactly one
 * audience (a token for several services could be replayed here by any of them), and a token
 * valid for longer than `maxLifetime` is refused.
 */
import { decodeJwt, type JWTVerifyGetKey } from "jose";
import { JWKS_DEFAULTS } from "../../config/machine-auth-jwt.ts";
import {
  parseSpiffeId,
  resolveSpiffeMachineAuth,
  type SpiffeId,
  type SpiffeMachineAuth,
  type SpiffeMachineAuthConfig,
} from "../../config/machine-auth-spiffe.ts";
import { BootsealError } from "../../errors.ts";
import { MAX_CREDENTIAL_CHARS, verifyJwt } from "./jwt-common.ts";
import { trustBundleKeys } from "./spiffe-bundles.ts";
import type { IdentityVerifier, ProvenIdentity, VerifyContext } from "./verifier.ts";

const WHAT = "spiffe JWT-SVID";
/** JWT-SVID spec §3: the algorithms a JWT-SVID may be signed with. */
export const JWT_SVID_ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "ES256",
  "ES384",
  "ES512",
  "PS256",
  "PS384",
  "PS512",
] as const;

function refuse(problem: string): BootsealError {
  return new BootsealError("UNAUTHORIZED", `${WHAT}: ${problem}`);
}

/** The SPIFFE ID in the token's `sub`, unverified: it only chooses the trust bundle. */
function subjectOf(credential: string): SpiffeId {
  let sub: unknown;
  try {
    sub = decodeJwt(credential).sub;
  } catch {
    throw refuse("not a valid signed JWT");
  }
  if (typeof sub !== "string") throw refuse('no "sub" claim');
  const id = parseSpiffeId(sub);
  if (id === null) throw refuse('claim "sub" is not a SPIFFE ID');
  return id;
}

export function spiffeVerifier(options: SpiffeMachineAuth): IdentityVerifier {
  const bundles = new Map<string, JWTVerifyGetKey>(
    options.trustDomains.map((td) => [td.name, trustBundleKeys(td, options, WHAT)]),
  );
  const clockSkewMs = options.clockSkewMs ?? JWKS_DEFAULTS.clockSkewMs;
  return {
    method: "spiffe",
    async verify(credential: string, ctx: VerifyContext): Promise<ProvenIdentity> {
      // Out of bounds (empty, too long): verifyJwt refuses it before any key is looked up.
      const inBounds =
        typeof credential === "string" && credential.length > 0 && credential.length <= MAX_CREDENTIAL_CHARS;
      const id = inBounds ? subjectOf(credential) : null;
      // What jose verifies the signature with: the bundle of the sub's trust domain.
      const keys: JWTVerifyGetKey = (header, token) => {
        if (typeof header.kid !== "string" || header.kid === "") throw refuse("no kid in the header");
        if (header.typ !== undefined && header.typ !== "JWT" && header.typ !== "JOSE") {
          throw refuse('header "typ" is neither JWT nor JOSE');
        }
        const bundle = id === null ? undefined : bundles.get(id.trustDomain);
        if (bundle === undefined)
          throw refuse("its trust domain is not one of machineAuth.spiffe.trustDomains");
        return bundle(header, token);
      };
      const payload = await verifyJwt(
        credential,
        {
          keys,
          issuers: undefined,
          algorithms: JWT_SVID_ALGORITHMS,
          audience: options.audience ?? ctx.audience,
          now: ctx.now,
          clockSkewMs,
          maxTokenAgeSeconds: undefined,
          what: WHAT,
        },
        ctx.signal,
      );
      const exp = payload.exp as number;
      if (exp * 1000 - ctx.now.getTime() > options.maxLifetimeMs + clockSkewMs) {
        throw refuse("valid for longer than machineAuth.spiffe.maxLifetime");
      }
      if (id === null) throw refuse("not a valid signed JWT"); // unreachable: verifyJwt refused it
      return {
        method: "spiffe",
        principal: id.id,
        attributes: { id: id.id, trustDomain: id.trustDomain, path: id.path },
      };
    },
  };
}

/** The verifier for a `machineAuth.spiffe` object as written (USAGE on a bad one). */
export function spiffeVerifierFromConfig(
  config: SpiffeMachineAuthConfig,
  where = "machineAuth.spiffe",
): IdentityVerifier {
  return spiffeVerifier(resolveSpiffeMachineAuth(config, where));
}
