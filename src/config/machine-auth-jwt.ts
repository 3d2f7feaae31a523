/**
 * `machineAuth.gcp` and `machineAuth.azure` of the service configuration: the schemas and
 * their resolution into the settings the JWT verifiers take (src/service/identity/gcp.ts,
 * azure.ts, jwt-common.ts). Here, not with the verifiers, because the configuration layer
 * loads and checks them and may not import the service (docs/architecture.md).
 */
import { parseDuration } from "../duration.ts";
import { BootsealError } from "../errors.ts";
import { duration, HTTP_URL, type SchemaNode, text } from "./schema-node.ts";

export const GOOGLE_JWKS_URL = "https://www.googleapis.com/oauth2/v3/certs";
export const GOOGLE_ISSUER = "https://accounts.google.com";

export const JWKS_DEFAULTS = {
  timeoutMs: 5_000,
  cooldownMs: 30_000,
  cacheMaxAgeMs: 600_000,
  clockSkewMs: 60_000,
} as const;

export const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** The configuration fields both JWT methods share (durations as in the rest of bootseal.yaml). */
export const JWKS_SCHEMA_PROPERTIES: Readonly<Record<string, SchemaNode>> = {
  timeout: duration("how long one request for the signing keys may take", "5s"),
  cooldown: duration(
    "after fetching the keys, how long a token with an unknown key id waits before it may cause another fetch (bounds the fetches an attacker can cause)",
    "30s",
  ),
  cacheMaxAge: duration("how long fetched keys are used before they are fetched again", "10m"),
  clockSkew: duration("the clock difference tolerated on `exp`, `nbf` and `iat`", "60s"),
};

/** `machineAuth.gcp` in bootseal.yaml. */
export const GCP_MACHINE_AUTH_SCHEMA: SchemaNode = {
  type: "object",
  additionalProperties: false,
  description: "verifying Compute Engine instance identity tokens (`bootseal fetch --auth gcp`)",
  properties: {
    jwksUrl: text("where Google's token signing keys are published (a JWKS)", {
      ...HTTP_URL,
      default: GOOGLE_JWKS_URL,
    }),
    issuer: text("the `iss` the tokens carry (the form without `https://` is accepted too)", {
      default: GOOGLE_ISSUER,
    }),
    ...JWKS_SCHEMA_PROPERTIES,
  },
};

/** `machineAuth.azure` in bootseal.yaml; absent: no Azure logins (there is no default tenant). */
export const AZURE_MACHINE_AUTH_SCHEMA: SchemaNode = {
  type: "object",
  additionalProperties: false,
  required: ["tenant"],
  description:
    "verifying Azure managed-identity tokens (`bootseal fetch --auth azure`); without it Azure logins are off",
  properties: {
    tenant: {
      type: "string",
      pattern: GUID.source,
      "x-message": "must be the tenant (directory) id, a GUID",
      description: "the Microsoft Entra tenant (directory) id of the machines' identities",
    },
    audience: text(
      "the `aud` the tokens carry when it is not the service's audience: the app ID URI the machines request, or the application (client) id for v2 tokens",
      { "x-doc-default": "the service's audience" },
    ),
    jwksUrl: text("where the tenant's signing keys are published (a JWKS)", {
      ...HTTP_URL,
      "x-doc-default": "`https://login.microsoftonline.com/{tenant}/discovery/v2.0/keys`",
    }),
    issuers: {
      type: "array",
      minItems: 1,
      items: { type: "string", minLength: 1 },
      description: "the accepted `iss` values (for other Azure clouds)",
      "x-doc-default":
        "`https://sts.windows.net/{tenant}/` and `https://login.microsoftonline.com/{tenant}/v2.0`",
    },
    ...JWKS_SCHEMA_PROPERTIES,
  },
};

export interface JwksConfig {
  readonly timeout?: string | number;
  readonly cooldown?: string | number;
  readonly cacheMaxAge?: string | number;
  readonly clockSkew?: string | number;
}

/** The JWKS durations, in ms. */
export interface JwksTimings {
  /** One JWKS request's time limit. */
  readonly timeoutMs: number;
  /** After a fetch, an unknown `kid` refetches only once this has passed (bounds the refetches). */
  readonly cooldownMs: number;
  /** Keys older than this are refetched before use. */
  readonly cacheMaxAgeMs: number;
  readonly clockSkewMs: number;
}

/** The durations of a `machineAuth.gcp` / `machineAuth.azure` object, in ms (USAGE on a bad one). */
export function jwksTimings(config: JwksConfig, where: string): JwksTimings {
  const ms = (value: string | number | undefined, key: string, dflt: number, min: number): number =>
    value === undefined ? dflt : parseDuration(value, `${where}.${key}`, { min });
  const clockSkewMs = ms(config.clockSkew, "clockSkew", JWKS_DEFAULTS.clockSkewMs, 0);
  if (clockSkewMs > 300_000) throw new BootsealError("USAGE", `${where}.clockSkew: at most 5m`);
  return {
    timeoutMs: ms(config.timeout, "timeout", JWKS_DEFAULTS.timeoutMs, 100),
    cooldownMs: ms(config.cooldown, "cooldown", JWKS_DEFAULTS.cooldownMs, 0),
    cacheMaxAgeMs: ms(config.cacheMaxAge, "cacheMaxAge", JWKS_DEFAULTS.cacheMaxAgeMs, 1000),
    clockSkewMs,
  };
}

/** `machineAuth.gcp` as written (the schema checked it). */
export interface GcpMachineAuthConfig extends JwksConfig {
  readonly jwksUrl?: string;
  readonly issuer?: string;
}

/** `machineAuth.azure` as written (the schema checked it). */
export interface AzureMachineAuthConfig extends JwksConfig {
  readonly tenant: string;
  readonly audience?: string;
  readonly jwksUrl?: string;
  readonly issuers?: readonly string[];
}

/** `machineAuth.gcp`, resolved: the gcp verifier's settings. */
export interface GcpMachineAuth extends JwksTimings {
  readonly jwksUrl?: string;
  readonly issuer?: string;
}

/** `machineAuth.azure`, resolved: the azure verifier's settings (tenant lower-cased). */
export interface AzureMachineAuth extends JwksTimings {
  readonly tenant: string;
  readonly audience?: string;
  readonly jwksUrl?: string;
  readonly issuers?: readonly string[];
}

export function resolveGcpMachineAuth(
  config: GcpMachineAuthConfig,
  where = "machineAuth.gcp",
): GcpMachineAuth {
  return { jwksUrl: config.jwksUrl, issuer: config.issuer, ...jwksTimings(config, where) };
}

export function resolveAzureMachineAuth(
  config: AzureMachineAuthConfig,
  where = "machineAuth.azure",
): AzureMachineAuth {
  if (typeof config.tenant !== "string" || !GUID.test(config.tenant)) {
    throw new BootsealError("USAGE", `${where}.tenant: must be the tenant (directory) id, a GUID`);
  }
  return {
    tenant: config.tenant.toLowerCase(),
    audience: config.audience,
    jwksUrl: config.jwksUrl,
    issuers: config.issuers,
    ...jwksTimings(config, where),
  };
}
