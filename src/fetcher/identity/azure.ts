/**
 * The `azure` login method, machine side: a managed-identity access token from the VM's
 * instance metadata service (IMDS), for the service's resource (its application ID URI).
 *
 * Environment (docs/fetcher.md):
 * - `BOOTSEAL_AZURE_IMDS_ENDPOINT`: IMDS's base URL (default `http://169.254.169.254`);
 * - `BOOTSEAL_AZURE_RESOURCE`: the resource to ask for, when it is not the service's audience
 *   (the app ID URI registered in Entra ID);
 * - `AZURE_CLIENT_ID`: the client id of the user-assigned identity to use, as the Azure SDKs
 *   read it (needed when the VM has more than one identity).
 */
import { BootsealError } from "../../errors.ts";
import { detail, metadataGet } from "./metadata-get.ts";
import type { CredentialContext, IdentityProvider } from "./provider.ts";

export const AZURE_IMDS_DEFAULT_ENDPOINT = "http://169.254.169.254";
const TOKEN_PATH = "/metadata/identity/oauth2/token";
const API_VERSION = "2018-02-01";
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export interface AzureProviderOptions {
  /** One request's time limit (default 5 s: IMDS is on the host). */
  readonly timeoutMs?: number;
  /** The resource to ask for (`--azure-resource`); before BOOTSEAL_AZURE_RESOURCE and the audience. */
  readonly resource?: string;
}

export function azureImdsBase(env: Readonly<Record<string, string | undefined>>): URL {
  const base = env.BOOTSEAL_AZURE_IMDS_ENDPOINT || AZURE_IMDS_DEFAULT_ENDPOINT;
  try {
    const url = new URL(base);
    if (url.protocol === "http:" || url.protocol === "https:") return url;
  } catch {
    // below
  }
  throw new BootsealError("USAGE", "BOOTSEAL_AZURE_IMDS_ENDPOINT: must be an http(s) URL");
}

export function azureProvider(options: AzureProviderOptions = {}): IdentityProvider {
  const timeoutMs = options.timeoutMs ?? 5_000;
  return {
    method: "azure",
    async credential(ctx: CredentialContext): Promise<string> {
      const url = new URL(TOKEN_PATH, azureImdsBase(ctx.env));
      url.searchParams.set("api-version", API_VERSION);
      url.searchParams.set("resource", options.resource || ctx.env.BOOTSEAL_AZURE_RESOURCE || ctx.audience);
      const clientId = ctx.env.AZURE_CLIENT_ID;
      if (clientId) url.searchParams.set("client_id", clientId);
      const where = `Azure IMDS (${url.origin})`;
      const res = await metadataGet(url, { metadata: "true" }, timeoutMs, where, ctx.signal);
      // Microsoft's retry guidance for IMDS: 404 (updating), 410, 429 and 5xx are transient.
      if (res.status === 404 || res.status === 410 || res.status === 429 || res.status >= 500) {
        throw new BootsealError("KEY_UNAVAILABLE", `${where}: HTTP ${res.status}${detail(res)}`);
      }
      if (res.status !== 200) {
        // 400 "Identity not found", an unknown resource (AADSTS500011), a missing header.
        throw new BootsealError(
          "UNAUTHORIZED",
          `${where}: refused the token (HTTP ${res.status}${detail(res)})`,
        );
      }
      let token: unknown;
      try {
        token = (JSON.parse(new TextDecoder().decode(res.body)) as { access_token?: unknown }).access_token;
      } catch {
        token = undefined;
      }
      if (typeof token !== "string" || !JWT_SHAPE.test(token)) {
        throw new BootsealError("KEY_UNAVAILABLE", `${where}: the answer holds no access token`);
      }
      return token;
    },
  };
}
