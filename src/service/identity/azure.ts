/**
 * The `azure` login method, service side: a managed-identity access token from the VM's
 * instance metadata service (IMDS), issued by Microsoft Entra ID for this service's resource
 * (its application ID URI), verified against the tenant's published keys. It proves which
 * Azure resource asked, as Entra puts it in the token: `xms_mirid` (the VM itself for a
 * system-assigned identity) or `xms_az_rid` (the VM that used a user-assigned identity).
 * Only virtual machines and scale-set VMs are accepted. docs/security.md "Machine identity: Azure".
 *
 * `vmId` (the VM's unique id in IMDS `compute.vmId`) is NOT in the token, and the machine's own
 * word for it proves nothing, so it is not an attribute: bind by `vmResourceId` (or
 * subscription / resource group / name), which Entra signs.
 */
import {
  type AzureMachineAuthConfig,
  GUID,
  JWKS_DEFAULTS,
  resolveAzureMachineAuth,
} from "../../config/machine-auth-jwt.ts";
import { BootsealError } from "../../errors.ts";
import { remoteKeys, stringClaim, verifyJwt } from "./jwt-common.ts";
import type { IdentityVerifier, ProvenIdentity, VerifyContext } from "./verifier.ts";

const WHAT = "azure managed-identity token";
/** Entra's managed-identity tokens live about 24 h (IMDS hands out the cached one); a little over. */
const MAX_TOKEN_AGE_SECONDS = 25 * 3600;
/**
 * An ARM id of a VM, or of a VM in a scale set (uniform orchestration). ARM ids are
 * case-insensitive and Entra writes `resourcegroups` in lower case.
 */
const VM_RESOURCE_ID =
  /^\/subscriptions\/([^/]+)\/resourcegroups\/([^/]+)\/providers\/microsoft\.compute\/(?:virtualmachines\/([^/]+)|virtualmachinescalesets\/([^/]+)\/virtualmachines\/([^/]+))$/i;

export interface AzureVerifierOptions {
  /** The Entra tenant (directory) id the VMs' identities live in. */
  readonly tenant: string;
  /**
   * The `aud` the tokens must carry, when it is not the service's own audience: the app ID URI
   * the machines ask IMDS for (v1 tokens), or the application (client) id (v2 tokens).
   */
  readonly audience?: string;
  /** Default `https://login.microsoftonline.com/{tenant}/discovery/v2.0/keys`. */
  readonly jwksUrl?: string;
  /** Default the tenant's v1 and v2 issuers (other clouds: set these and jwksUrl). */
  readonly issuers?: readonly string[];
  readonly timeoutMs?: number;
  readonly cooldownMs?: number;
  readonly cacheMaxAgeMs?: number;
  readonly clockSkewMs?: number;
}

export function azureIssuers(tenant: string): readonly string[] {
  return [`https://sts.windows.net/${tenant}/`, `https://login.microsoftonline.com/${tenant}/v2.0`];
}

export function azureJwksUrl(tenant: string): string {
  return `https://login.microsoftonline.com/${tenant}/discovery/v2.0/keys`;
}

export function azureVerifier(options: AzureVerifierOptions): IdentityVerifier {
  if (typeof options.tenant !== "string" || !GUID.test(options.tenant)) {
    throw new BootsealError("USAGE", "machineAuth.azure.tenant: must be the tenant (directory) id, a GUID");
  }
  const tenant = options.tenant.toLowerCase();
  const issuers = options.issuers ?? azureIssuers(tenant);
  const keys = remoteKeys({ ...options, jwksUrl: options.jwksUrl ?? azureJwksUrl(tenant) }, WHAT);
  const clockSkewMs = options.clockSkewMs ?? JWKS_DEFAULTS.clockSkewMs;
  return {
    method: "azure",
    async verify(credential: string, ctx: VerifyContext): Promise<ProvenIdentity> {
      const payload = await verifyJwt(
        credential,
        {
          keys,
          issuers,
          audience: options.audience ?? ctx.audience,
          now: ctx.now,
          clockSkewMs,
          maxTokenAgeSeconds: MAX_TOKEN_AGE_SECONDS,
          what: WHAT,
        },
        ctx.signal,
      );
      const claims = payload as Readonly<Record<string, unknown>>;
      // The issuer already names the tenant; `tid` must agree (a custom `issuers` list may not).
      if (stringClaim(claims, "tid", WHAT).toLowerCase() !== tenant) {
        throw new BootsealError("UNAUTHORIZED", `${WHAT}: issued for another tenant`);
      }
      const objectId = stringClaim(claims, "oid", WHAT);
      const resourceId = vmResourceOf(claims);
      const m = VM_RESOURCE_ID.exec(resourceId);
      if (!m) {
        throw new BootsealError(
          "UNAUTHORIZED",
          `${WHAT}: the identity was used by a resource that is not a virtual machine (only Microsoft.Compute virtualMachines and scale-set VMs log in)`,
        );
      }
      const [, subscription, resourceGroup, vm, scaleSet, instance] = m as unknown as string[];
      // A scale-set VM's name in ARM is `{scaleSet}_{instanceId}`.
      const vmName = vm ?? `${scaleSet}_${instance}`;
      const attributes: Record<string, string> = {
        tenant,
        subscription: (subscription as string).toLowerCase(),
        resourceGroup: (resourceGroup as string).toLowerCase(),
        vmName: vmName.toLowerCase(),
        vmResourceId: resourceId.toLowerCase(),
        objectId: objectId.toLowerCase(),
      };
      if (scaleSet !== undefined) attributes.vmScaleSet = scaleSet.toLowerCase();
      const clientId = claims.appid ?? claims.azp;
      if (typeof clientId === "string" && clientId !== "") attributes.clientId = clientId.toLowerCase();
      return { method: "azure", principal: resourceId, attributes };
    },
  };
}

/**
 * The VM's ARM id: `xms_az_rid` when present (a user-assigned identity: `xms_mirid` then names
 * the identity, not the VM), else `xms_mirid` (a system-assigned identity: the VM itself).
 */
function vmResourceOf(claims: Readonly<Record<string, unknown>>): string {
  for (const name of ["xms_az_rid", "xms_mirid"]) {
    const value = claims[name];
    if (typeof value === "string" && value !== "") return value.replace(/\/+$/, "");
  }
  throw new BootsealError("UNAUTHORIZED", `${WHAT}: no "xms_mirid" claim (not a managed-identity token)`);
}

/** The verifier for a `machineAuth.azure` object as written (USAGE on a bad one). */
export function azureVerifierFromConfig(
  config: AzureMachineAuthConfig,
  where = "machineAuth.azure",
): IdentityVerifier {
  return azureVerifier(resolveAzureMachineAuth(config, where));
}
