/**
 * The `gcp` login method, service side: a Compute Engine instance identity token (a JWT the
 * metadata server signs for the instance, audience = this service, `format=full`) verified
 * against Google's published keys. It proves which instance asked: project, zone, name and
 * id, as Google's `google.compute_engine` claims say. docs/security.md "Machine identity: GCP".
 */
import {
  type GcpMachineAuthConfig,
  GOOGLE_ISSUER,
  GOOGLE_JWKS_URL,
  JWKS_DEFAULTS,
  resolveGcpMachineAuth,
} from "../../config/machine-auth-jwt.ts";
import { BootsealError } from "../../errors.ts";
import { remoteKeys, stringClaim, verifyJwt } from "./jwt-common.ts";
import type { IdentityVerifier, ProvenIdentity, VerifyContext } from "./verifier.ts";

/** Google: "each token expires within one hour". */
const MAX_TOKEN_AGE_SECONDS = 3600;
const WHAT = "gcp identity token";
/** Project ids (also `example.com:proj`), zones, instance names and ids: nothing that could split a principal. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,254}$/;

export interface GcpVerifierOptions {
  readonly jwksUrl?: string;
  /** The issuer; its form without `https://` is accepted too (Google uses both). */
  readonly issuer?: string;
  readonly timeoutMs?: number;
  readonly cooldownMs?: number;
  readonly cacheMaxAgeMs?: number;
  readonly clockSkewMs?: number;
}

export function gcpVerifier(options: GcpVerifierOptions = {}): IdentityVerifier {
  const issuer = options.issuer ?? GOOGLE_ISSUER;
  const issuers = issuer.startsWith("https://") ? [issuer, issuer.slice("https://".length)] : [issuer];
  const keys = remoteKeys({ ...options, jwksUrl: options.jwksUrl ?? GOOGLE_JWKS_URL }, WHAT);
  const clockSkewMs = options.clockSkewMs ?? JWKS_DEFAULTS.clockSkewMs;
  return {
    method: "gcp",
    async verify(credential: string, ctx: VerifyContext): Promise<ProvenIdentity> {
      const payload = await verifyJwt(
        credential,
        {
          keys,
          issuers,
          audience: ctx.audience,
          now: ctx.now,
          clockSkewMs,
          maxTokenAgeSeconds: MAX_TOKEN_AGE_SECONDS,
          what: WHAT,
        },
        ctx.signal,
      );
      const engine = computeEngineClaims(payload.google);
      const name = (claim: string): string => {
        const value = stringClaim(engine, claim, WHAT);
        if (!NAME.test(value)) {
          throw new BootsealError(
            "UNAUTHORIZED",
            `${WHAT}: claim "google.compute_engine.${claim}" is malformed`,
          );
        }
        return value;
      };
      const project = name("project_id");
      const zone = name("zone");
      const instanceName = name("instance_name");
      return {
        method: "gcp",
        principal: `projects/${project}/zones/${zone}/instances/${instanceName}`,
        attributes: {
          project,
          projectNumber: name("project_number"),
          zone,
          instanceName,
          instanceId: name("instance_id"),
        },
      };
    },
  };
}

function computeEngineClaims(google: unknown): Readonly<Record<string, unknown>> {
  const engine = isObject(google) ? google.compute_engine : undefined;
  if (!isObject(engine)) {
    // A `format=standard` token (the metadata server's default) names only the service account.
    throw new BootsealError(
      "UNAUTHORIZED",
      `${WHAT}: no google.compute_engine claims; request the token with format=full (bootseal fetch --auth gcp does)`,
    );
  }
  return engine;
}

function isObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The verifier for a `machineAuth.gcp` object as written (USAGE on a bad duration). */
export function gcpVerifierFromConfig(
  config: GcpMachineAuthConfig,
  where = "machineAuth.gcp",
): IdentityVerifier {
  return gcpVerifier(resolveGcpMachineAuth(config, where));
}
