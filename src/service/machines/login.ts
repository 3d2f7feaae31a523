/**
 * A machine's login with its cloud identity (docs/api.md "Machine login"): the credential is
 * verified by its method's verifier (../identity/), the bindings must let the proven identity
 * act for the machine in the URL, and a bootstrap token for this boot is minted and stored
 * as a publish stores one (status mirror first, then the token record). The previous token
 * stops working. The credential itself is never kept, logged or answered.
 */
import type { MachineAuthConfig } from "../../config/machine-auth.ts";
import { BootsealError } from "../../errors.ts";
import type { LoginRequest, LoginResponse } from "../../machine/identity-login.ts";
import { formatMachineId, type MachineId } from "../../machine/machine-id.ts";
import { quoteEtag, type ServiceContext } from "../context.ts";
import { allowedBinding } from "../identity/bindings.ts";
import type { IdentityVerifier } from "../identity/verifier.ts";
import { mintToken } from "../tokens.ts";

export interface MachineLogin {
  readonly config: MachineAuthConfig;
  readonly verifiers: ReadonlyMap<string, IdentityVerifier>;
}

export interface LoginOptions {
  readonly signal?: AbortSignal;
  /** Told who the credential proved, before the binding is checked (the audit line). */
  readonly identified?: (principal: string) => void;
}

export async function loginMachine(
  ctx: ServiceContext,
  login: MachineLogin,
  m: MachineId,
  request: LoginRequest,
  options: LoginOptions = {},
): Promise<LoginResponse> {
  const { audience, bindings, tokenTtlMs } = login.config;
  const verifier = login.verifiers.get(request.method);
  if (
    audience === undefined ||
    verifier === undefined ||
    !bindings.some((b) => b.method === request.method)
  ) {
    throw new BootsealError(
      "UNSUPPORTED",
      `${request.method} machine login is not configured on this service`,
    );
  }
  const identity = await verifier.verify(request.credential, {
    audience,
    now: ctx.now(),
    machine: m,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  options.identified?.(identity.principal);
  if (!allowedBinding(bindings, identity, m)) {
    throw new BootsealError(
      "FORBIDDEN",
      `${identity.principal} is not bound to machine ${formatMachineId(m)} (machineAuth.bindings)`,
    );
  }
  if (identity.method === "tpm")
    await checkSealedEk(ctx, m, identity.attributes.ekPublicSha256, options.signal);
  // A token for a machine with nothing to fetch would only be a record to clean up.
  const configEtag = await ctx.machines.configEtag(m, options.signal ? { signal: options.signal } : {});
  if (configEtag === null) {
    throw new BootsealError("NOT_FOUND", `no config is published for ${formatMachineId(m)}`);
  }
  const now = ctx.now();
  const minted = mintToken(m, tokenTtlMs, ctx.bootstrapToken.uses, now);
  const token = minted.token;
  const record = { ...minted.record, configEtag: quoteEtag(configEtag) };
  // The mirror first, as a publish does (machines/publish.ts).
  await ctx.machines.recordToken(m, record);
  await ctx.machines.writeToken(m, record);
  return { token, expiresAt: record.expiresAt };
}

/**
 * A config sealed to one TPM (X-Bootseal-Tpm-Ek) is that TPM's alone to log in for: another
 * TPM the bindings also trust could not decrypt it, but could report its phases or have a
 * one-time config deleted before the machine fetched it.
 */
async function checkSealedEk(
  ctx: ServiceContext,
  m: MachineId,
  ekPublicSha256: string | undefined,
  signal: AbortSignal | undefined,
): Promise<void> {
  const status = await ctx.machines.readStatus(m, signal ? { signal } : {});
  const sealedTo = status?.value.config?.tpmEkSha256;
  if (sealedTo === undefined || sealedTo === ekPublicSha256) return;
  throw new BootsealError(
    "FORBIDDEN",
    `tpm login refused (ek-not-sealed-to): the config of ${formatMachineId(m)} is sealed to another TPM (EK sha256:${sealedTo})`,
  );
}
