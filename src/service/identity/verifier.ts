/**
 * The seam between the login route and each cloud identity method: a verifier turns the
 * credential a machine sent into the attributes it proves, and the bindings in the service
 * configuration (identity/bindings.ts) decide which machines those attributes may act for.
 * One file per method (aws-iam.ts, gcp.ts, azure.ts, tpm.ts), one registry line (index.ts).
 */
import type { CloudAuthMethod } from "../../machine/identity-login.ts";
import type { MachineId } from "../../machine/machine-id.ts";

/** What a verified cloud credential proved. */
export interface ProvenIdentity {
  readonly method: CloudAuthMethod;
  /**
   * A stable name of the caller for the audit log: the role ARN, the GCE instance
   * (`projects/P/zones/Z/instances/NAME`), the Azure VM resource id.
   */
  readonly principal: string;
  /**
   * What bindings match on, by method:
   * - aws-iam: arn, account, userId, role (the role name, for assumed roles)
   * - gcp: project, projectNumber, zone, instanceName, instanceId
   * - azure (all lower-cased): tenant, subscription, resourceGroup, vmName, vmResourceId,
   *   objectId (the managed identity), clientId and, for a scale-set VM, vmScaleSet; no vmId
   *   (it is not in the token)
   * - tpm: ekPublicSha256 (of the EK's SubjectPublicKeyInfo) and, for an EK certified by
   *   machineAuth.tpm.ekCaFile, ekCertIssuer
   */
  readonly attributes: Readonly<Record<string, string>>;
}

export interface VerifyContext {
  /**
   * This service's identity: AWS requests sign it in SERVER_ID_HEADER; GCP and Azure tokens
   * must carry it as their audience.
   */
  readonly audience: string;
  readonly now: Date;
  readonly signal?: AbortSignal;
  /** The machine in the login URL (tpm: its challenge must have been for this machine). */
  readonly machine?: MachineId;
}

export interface IdentityVerifier {
  readonly method: CloudAuthMethod;
  /**
   * Verifies one credential. Throws BootsealError: UNAUTHORIZED for a credential that does
   * not verify (bad signature, wrong audience, stale, tampered), KEY_UNAVAILABLE when the
   * issuer (STS, the JWKS endpoint) cannot be reached. Messages never hold the credential.
   */
  verify(credential: string, ctx: VerifyContext): Promise<ProvenIdentity>;
}
