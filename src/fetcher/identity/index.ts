/**
 * The identities `bootseal fetch --auth` can log in with: method -> provider
 * (provider.ts is the seam). One line per method.
 */
import { BootsealError } from "../../errors.ts";
import type { CloudAuthMethod } from "../../machine/identity-login.ts";
import { type AwsIamProviderOptions, awsIamProvider } from "./aws-iam.ts";
import { type AzureProviderOptions, azureProvider } from "./azure.ts";
import { gcpProvider } from "./gcp.ts";
import type { IdentityProvider } from "./provider.ts";
import { type SpiffeProviderOptions, spiffeProvider } from "./spiffe.ts";
import { tpmProvider } from "./tpm.ts";

/** Per-method settings from the fetch flags. */
export interface ProviderSettings {
  readonly aws?: AwsIamProviderOptions;
  readonly azure?: AzureProviderOptions;
  readonly spiffe?: SpiffeProviderOptions;
}

type Factory = (settings: ProviderSettings) => IdentityProvider;

const PROVIDERS: Partial<Record<CloudAuthMethod, Factory>> = {
  "aws-iam": (settings) => awsIamProvider(settings.aws),
  gcp: () => gcpProvider(),
  azure: (settings) => azureProvider(settings.azure),
  spiffe: (settings) => spiffeProvider(settings.spiffe),
  tpm: () => tpmProvider(),
};

export function identityProvider(method: CloudAuthMethod, settings: ProviderSettings = {}): IdentityProvider {
  const factory = PROVIDERS[method];
  if (!factory) throw new BootsealError("UNSUPPORTED", `--auth ${method} is not supported by this fetcher`);
  return factory(settings);
}
