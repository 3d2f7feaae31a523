/**
 * The `gcp` login method, machine side: the instance identity token from the Compute Engine
 * metadata server, `format=full` (so it names project, zone and instance) with the service as
 * audience. The server is found as Google's client libraries find it: `GCE_METADATA_HOST`
 * (host[:port], or a URL) overrides `metadata.google.internal`. docs/fetcher.md, docs/security.md.
 */
import { BootsealError } from "../../errors.ts";
import { detail, metadataGet } from "./metadata-get.ts";
import type { CredentialContext, IdentityProvider } from "./provider.ts";

export const GCE_METADATA_DEFAULT_HOST = "metadata.google.internal";
const IDENTITY_PATH = "/computeMetadata/v1/instance/service-accounts/default/identity";
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export interface GcpProviderOptions {
  /** One request's time limit (default 5 s: the metadata server is on the host). */
  readonly timeoutMs?: number;
}

/** The metadata server's base URL: `GCE_METADATA_IP`, then `GCE_METADATA_HOST` (as gcp-metadata reads them). */
export function gceMetadataBase(env: Readonly<Record<string, string | undefined>>): URL {
  const host = env.GCE_METADATA_IP || env.GCE_METADATA_HOST || GCE_METADATA_DEFAULT_HOST;
  const withScheme = /^https?:\/\//.test(host) ? host : `http://${host}`;
  try {
    return new URL(withScheme);
  } catch {
    throw new BootsealError("USAGE", "GCE_METADATA_HOST: not a host[:port] or URL");
  }
}

export function gcpProvider(options: GcpProviderOptions = {}): IdentityProvider {
  const timeoutMs = options.timeoutMs ?? 5_000;
  return {
    method: "gcp",
    async credential(ctx: CredentialContext): Promise<string> {
      const url = new URL(IDENTITY_PATH, gceMetadataBase(ctx.env));
      url.searchParams.set("audience", ctx.audience);
      url.searchParams.set("format", "full");
      const where = `the GCE metadata server (${url.origin})`;
      const res = await metadataGet(url, { "metadata-flavor": "Google" }, timeoutMs, where, ctx.signal);
      // Google's libraries check this too: anything else answering is not the metadata server.
      if (res.headers["metadata-flavor"] !== "Google") {
        throw new BootsealError("KEY_UNAVAILABLE", `${where}: the answer lacks "Metadata-Flavor: Google"`);
      }
      if (res.status === 404) {
        throw new BootsealError(
          "UNAUTHORIZED",
          `${where}: no identity token (HTTP 404): the instance needs a service account attached (it needs no IAM role)`,
        );
      }
      if (res.status >= 500 || res.status === 429) {
        throw new BootsealError("KEY_UNAVAILABLE", `${where}: HTTP ${res.status}${detail(res)}`);
      }
      if (res.status !== 200) {
        throw new BootsealError(
          "UNAUTHORIZED",
          `${where}: refused the identity token (HTTP ${res.status}${detail(res)})`,
        );
      }
      const token = new TextDecoder().decode(res.body).trim();
      if (!JWT_SHAPE.test(token)) {
        throw new BootsealError("KEY_UNAVAILABLE", `${where}: the answer is not a JWT`);
      }
      return token;
    },
  };
}
