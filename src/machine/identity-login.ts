/**
 * The machine-identity login exchange, shared by the fetcher and the service: a machine with
 * no bootstrap token proves who it is with its cloud identity once per boot, at
 * `POST /v1/machines/:ns/:name/login`, and gets a bootstrap token for this boot back; the
 * fetch and the status posts then use that token as before (so the cloud issuer is asked
 * once per boot, not once per request). One home for the method names and the wire shapes;
 * docs/api.md "Machine login" and docs/security.md say what each method proves.
 */

/**
 * The identities a machine can log in with (`bootseal fetch --auth`): the clouds', a SPIFFE
 * JWT-SVID, and its TPM (`tpm`: a challenge first, at `…/login/challenge`, see TpmChallengeRequest).
 */
export const CLOUD_AUTH_METHODS = ["aws-iam", "gcp", "azure", "spiffe", "tpm"] as const;
export type CloudAuthMethod = (typeof CLOUD_AUTH_METHODS)[number];
/** `token` is the bootstrap token: the portable fallback, and the default. */
export type MachineAuthMethod = "token" | CloudAuthMethod;

export function isCloudAuthMethod(value: unknown): value is CloudAuthMethod {
  return typeof value === "string" && (CLOUD_AUTH_METHODS as readonly string[]).includes(value);
}

/** The login request body. `credential` is method-specific (a signed request, a JWT). */
export interface LoginRequest {
  readonly method: CloudAuthMethod;
  readonly credential: string;
}

/** The login answer: a bootstrap token for this machine and this boot. */
export interface LoginResponse {
  readonly token: string;
  readonly expiresAt: string;
}

/**
 * The header a signed AWS request carries, inside the signature, to bind it to one bootseal
 * service (the role of Vault's `X-Vault-AWS-IAM-Server-ID`): a signature made for one service
 * cannot be replayed against another.
 */
export const SERVER_ID_HEADER = "x-bootseal-server-id";

/**
 * The body of the one AWS request a machine signs for a login (sts:GetCallerIdentity): the
 * service refuses any other, so a login signature can never be used for anything else.
 */
export const AWS_GET_CALLER_IDENTITY_BODY = "Action=GetCallerIdentity&Version=2011-06-15";

/**
 * A TPM login's first step (`POST /v1/machines/:ns/:name/login/challenge`): the machine's
 * endorsement key, its EK certificate when the TPM holds one, and an attestation key made
 * under the EK; all base64 (the keys as TPM2B_PUBLIC, the certificate as DER).
 */
export interface TpmChallengeRequest {
  readonly ekPublic: string;
  readonly ekCertificate?: string;
  readonly akPublic: string;
}

/**
 * The service's answer: a single-use nonce to quote over, the PCRs to quote (sha256 bank),
 * and a credential made to the EK for the AK's name (TPM2_MakeCredential; base64 TPM2Bs).
 */
/** The largest TPM event log a `tpm` login carries (a real UEFI log is 20-100 KiB). */
export const TPM_EVENT_LOG_MAX_BYTES = 256 * 1024;

export interface TpmChallengeResponse {
  readonly nonce: string;
  readonly pcrs: readonly number[];
  /** true: the binding replays the machine's measured-boot event log; send it (`eventLog`). */
  readonly eventLog?: boolean;
  readonly credentialBlob: string;
  readonly encryptedSecret: string;
  readonly expiresAt: string;
}

/**
 * The `tpm` login credential: base64 of this JSON. `secret` is what TPM2_ActivateCredential
 * recovered; `attest` and `signature` are the TPM2_Quote's TPMS_ATTEST and TPMT_SIGNATURE.
 */
export interface TpmLoginCredential {
  readonly nonce: string;
  readonly secret: string;
  readonly attest: string;
  readonly signature: string;
  /** The quoted PCRs' sha256 values, concatenated in index order (their hash is the quote's digest). */
  readonly pcrValues?: string;
  /** The TCG event log, when the challenge asked for it. */
  readonly eventLog?: string;
}
