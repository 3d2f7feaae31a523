/**
 * GET /v1/machines/:ns/:name/userdata?format=cloud-init|ignition|powershell: the non-secret
 * stub that installs and runs `bootseal fetch`. The stub must carry a bootstrap token, and the
 * service keeps only token hashes, so every call mints a FRESH token and the previous one
 * stops working (docs/api.md). The executable depends on the operating system: cloud-init and
 * Ignition stubs download fetcherArtifact (Linux), PowerShell stubs fetcherArtifactWindows
 * (bootseal.exe). There is no fallback from one to the other: a Windows stub pinned to a Linux
 * executable could never run, so a missing artifact is a 501 before any token is minted.
 */
import type { FastifyInstance } from "fastify";
import type { FetcherArtifact } from "../../config/service-config.ts";
import { BootsealError } from "../../errors.ts";
import type { ServiceContext } from "../context.ts";
import { configKey } from "../machine-store.ts";
import { userdataSchema } from "../schemas/config.ts";
import { mintToken } from "../tokens.ts";
import { renderUserdata, type UserdataFormat } from "../userdata/index.ts";

export function userdataRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.get(
    "/v1/machines/:ns/:name/userdata",
    { schema: userdataSchema, config: { auth: { scope: "configs:write" }, audit: "mint-token" } },
    async (request, reply) => {
      const p = request.params as { ns: string; name: string };
      const { format } = request.query as { format: UserdataFormat };
      const m = { namespace: p.ns, name: p.name };
      const artifact = artifactFor(ctx, format);
      if ((await ctx.machines.store.head(configKey(m))) === null) {
        throw new BootsealError("NOT_FOUND", `no config is published for ${p.ns}/${p.name}`);
      }
      const now = ctx.now();
      const { token, record } = mintToken(m, ctx.bootstrapToken.ttlMs, ctx.bootstrapToken.uses, now);
      // Rendered first: a stub that cannot be made must not cost the machine its current token.
      const stub = renderUserdata(format, {
        serviceUrl: ctx.publicUrl ?? `${request.protocol}://${request.host}`,
        machine: m,
        bootstrapToken: token,
        artifact,
      });
      await ctx.machines.writeToken(m, record);
      return reply
        .code(200)
        .header("content-type", stub.contentType)
        .header("cache-control", "no-store")
        .header("x-bootseal-token-expires-at", record.expiresAt)
        .send(stub.body);
    },
  );
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
