/**
 * The machine side of a cloud identity login: a provider produces the credential the service's
 * verifier of the same method checks (src/service/identity/verifier.ts). One file per method
 * (aws-iam.ts, gcp.ts, azure.ts, tpm.ts), one registry line (index.ts).
 */
import type {
  CloudAuthMethod,
  TpmChallengeRequest,
  TpmChallengeResponse,
} from "../../machine/identity-login.ts";

export interface CredentialContext {
  /** The service's identity (the audience of a JWT, the AWS server-ID header's value). */
  readonly audience: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly signal?: AbortSignal;
  /** tpm: asks the service for a challenge (`…/login/challenge`) before the credential. */
  readonly challenge?: (request: TpmChallengeRequest) => Promise<TpmChallengeResponse>;
}

export interface IdentityProvider {
  readonly method: CloudAuthMethod;
  /**
   * The credential for one login. Throws BootsealError KEY_UNAVAILABLE when the metadata
   * service or credential chain cannot be reached, UNAUTHORIZED when it refuses.
   */
  credential(ctx: CredentialContext): Promise<string>;
}
