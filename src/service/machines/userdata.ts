/**
 * A user-data stub for a machine with a published config. The stub must carry a bootstrap
 * token, and the service keeps only token hashes, so every stub mints a FRESH token and the
 * previous one stops working (docs/api.md). The executable depends on the operating system:
 * cloud-init and Ignition stubs download fetcherArtifact (Linux), PowerShell stubs
 * fetcherArtifactWindows (bootseal.exe). There is no fallback from one to the other: a
 * Windows stub pinned to a Linux executable could never run, so a missing artifact is a 501
 * before any token is minted.
 */
import type { FetcherArtifact } from "../../config/service-config.ts";
import { BootsealError } from "../../errors.ts";
import { formatMachineId, type MachineId } from "../../machine/machine-id.ts";
import type { ServiceContext } from "../context.ts";
import { mintToken } from "../tokens.ts";
import { renderUserdata, type UserdataFormat } from "../userdata/index.ts";

export interface UserdataStub {
  readonly contentType: string;
  readonly body: string;
  readonly tokenExpiresAt: string;
}

export async function mintUserdata(
  ctx: ServiceContext,
  m: MachineId,
  format: UserdataFormat,
  serviceUrl: string,
): Promise<UserdataStub> {
  const artifact = artifactFor(ctx, format);
  if (!(await ctx.machines.hasConfig(m))) {
    throw new BootsealError("NOT_FOUND", `no config is published for ${formatMachineId(m)}`);
  }
  const now = ctx.now();
  const { token, record } = mintToken(m, ctx.bootstrapToken.ttlMs, ctx.bootstrapToken.uses, now);
  // Rendered first: a stub that cannot be made must not cost the machine its current token.
  const stub = renderUserdata(format, { serviceUrl, machine: m, bootstrapToken: token, artifact });
  // The mirror first, as a publish does (machines/publish.ts).
  await ctx.machines.recordToken(m, record);
  await ctx.machines.writeToken(m, record);
  return { contentType: stub.contentType, body: stub.body, tokenExpiresAt: record.expiresAt };
}

/** The fetcher executable a stub of this format downloads; 501 when it is not configured. */
function artifactFor(ctx: ServiceContext, format: UserdataFormat): FetcherArtifact {
  if (format === "powershell") {
    if (ctx.fetcherArtifactWindows) return ctx.fetcherArtifactWindows;
    throw new BootsealError(
      "UNSUPPORTED",
      "powershell user-data stubs need fetcherArtifactWindows (the Windows bootseal.exe) in the service configuration",
    );
  }
  if (ctx.fetcherArtifact) return ctx.fetcherArtifact;
  throw new BootsealError(
    "UNSUPPORTED",
    `${format} user-data stubs need fetcherArtifact (the Linux bootseal executable) in the service configuration`,
  );
}
