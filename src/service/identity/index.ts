/**
 * The identity methods the login route knows: method -> verifier (verifier.ts is the
 * seam). One line per method; a method without a line here is answered 501.
 */
import type { MachineAuthConfig } from "../../config/machine-auth.ts";
import type { CloudAuthMethod } from "../../machine/identity-login.ts";
import { type AwsIamOptions, awsIamVerifier } from "./aws-iam.ts";
import { azureVerifier } from "./azure.ts";
import { gcpVerifier } from "./gcp.ts";
import { spiffeVerifier } from "./spiffe.ts";
import { tpmVerifier } from "./tpm.ts";
import type { IdentityVerifier } from "./verifier.ts";

export interface VerifierOptions {
  /** For tests: the STS call's attempt settings. */
  readonly aws?: Pick<AwsIamOptions, "sts">;
}

/** Null: the method cannot work with this configuration (answered 501). */
type Factory = (config: MachineAuthConfig, options: VerifierOptions) => IdentityVerifier | null;

const VERIFIERS: Partial<Record<CloudAuthMethod, Factory>> = {
  "aws-iam": (config, options) => awsIamVerifier({ ...config.aws, ...options.aws }),
  gcp: (config) => gcpVerifier(config.gcp),
  azure: (config) => (config.azure === undefined ? null : azureVerifier(config.azure)),
  spiffe: (config) => (config.spiffe === undefined ? null : spiffeVerifier(config.spiffe)),
  tpm: (config) => (config.bindings.some((b) => b.method === "tpm") ? tpmVerifier(config) : null),
};

/** The verifiers for this configuration, by method. */
export function identityVerifiers(
  config: MachineAuthConfig,
  options: VerifierOptions = {},
): ReadonlyMap<CloudAuthMethod, IdentityVerifier> {
  const out = new Map<CloudAuthMethod, IdentityVerifier>();
  for (const [method, factory] of Object.entries(VERIFIERS) as [CloudAuthMethod, Factory][]) {
    const verifier = factory(config, options);
    if (verifier !== null) out.set(method, verifier);
  }
  return out;
}

/**
 * The `bootseal fetch` flags a user-data stub passes for a machine that logs in with `method`
 * (machineAuthFor in bindings.ts): the service's audience and, for AWS, the region and STS
 * endpoint it checks, so that the machine signs for exactly what the service expects (an
 * instance has no AWS_REGION of its own to guess from); for Azure, the resource to ask IMDS
 * for when the tokens' audience is not the service's (machineAuth.azure.audience). GCP and SPIFFE
 * need nothing more: their token's audience is the server id (a JWT-SVID is read from the
 * fetcher's default file unless the stub's --spiffe-jwt-file says otherwise). No secret among them.
 */
export function loginFlags(config: MachineAuthConfig, method: CloudAuthMethod): string[] {
  const flags = ["--auth", method];
  if (config.audience !== undefined) flags.push("--server-id", config.audience);
  if (method === "aws-iam") {
    flags.push("--aws-sts-region", config.aws.region, "--aws-sts-endpoint", config.aws.stsEndpoint);
  }
  if (method === "azure" && config.azure?.audience !== undefined) {
    flags.push("--azure-resource", config.azure.audience);
  }
  return flags;
}
