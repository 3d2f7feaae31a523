/**
 * `machineAuth.spiffe` of the service configuration: the trust domains whose JWT-SVIDs may log
 * machines in, each with where its trust bundle comes from (a SPIFFE bundle endpoint, profile
 * `https_web` or `https_spiffe`, or a file), resolved into the settings of the spiffe verifier
 * (src/service/identity/spiffe.ts). Also the one home of SPIFFE ID syntax (the SPIFFE-ID spec):
 * the configuration checks endpoint ids with it, the verifier a token's `sub`.
 */
import { parseDuration } from "../duration.ts";
import { BootsealError } from "../errors.ts";
import {
  JWKS_SCHEMA_PROPERTIES,
  type JwksConfig,
  type JwksTimings,
  jwksTimings,
} from "./machine-auth-jwt.ts";
import { duration, type SchemaNode, text } from "./schema-node.ts";

/** A trust domain name: lower-case letters, digits, `.`, `-`, `_` (SPIFFE-ID §2.1). */
const TRUST_DOMAIN = /^[a-z0-9._-]{1,255}$/;
/** One path segment: letters, digits, `.`, `-`, `_`; never `.` or `..` (SPIFFE-ID §2.2). */
const SEGMENT = /^[A-Za-z0-9._-]+$/;
const MAX_ID_CHARS = 2048;

export interface SpiffeId {
  /** `spiffe://trust-domain/path` as given (it is already canonical when it parses). */
  readonly id: string;
  readonly trustDomain: string;
  /** `/a/b`, or `` for the trust domain's own id. */
  readonly path: string;
}

/** The SPIFFE ID in `text`, or null when it is not one (no normalisation: `SPIFFE://`, `%2F`, `//` refuse). */
export function parseSpiffeId(text: string): SpiffeId | null {
  if (text.length > MAX_ID_CHARS || !text.startsWith("spiffe://")) return null;
  const rest = text.slice("spiffe://".length);
  const slash = rest.indexOf("/");
  const trustDomain = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? "" : rest.slice(slash);
  if (!TRUST_DOMAIN.test(trustDomain)) return null;
  if (path !== "") {
    const segments = path.slice(1).split("/");
    if (segments.some((s) => !SEGMENT.test(s) || s === "." || s === "..")) return null;
  }
  return { id: text, trustDomain, path };
}

export const SPIFFE_PROFILES = ["https_web", "https_spiffe"] as const;
export type SpiffeProfile = (typeof SPIFFE_PROFILES)[number];

/** Where a trust domain's bundle comes from. */
export type SpiffeBundleSource =
  | { readonly kind: "file"; readonly path: string }
  | {
      readonly kind: "https_web";
      readonly url: URL;
      /** PEM file of the CAs that sign the endpoint's certificate; undefined: the system's roots. */
      readonly caFile?: string;
    }
  | {
      readonly kind: "https_spiffe";
      readonly url: URL;
      /** The SPIFFE ID the endpoint's X509-SVID must carry. */
      readonly endpointId: string;
      /** The trust domain's bundle to authenticate the endpoint with until the first fetch. */
      readonly bootstrapBundleFile: string;
    };

export interface SpiffeTrustDomain {
  readonly name: string;
  readonly source: SpiffeBundleSource;
}

/** `machineAuth.spiffe`, resolved: the spiffe verifier's settings. */
export interface SpiffeMachineAuth extends JwksTimings {
  readonly trustDomains: readonly SpiffeTrustDomain[];
  /** The `aud` the JWT-SVIDs carry when it is not the service's own audience. */
  readonly audience?: string;
  /** The longest a JWT-SVID may still be valid for when it arrives (its `exp` from now). */
  readonly maxLifetimeMs: number;
}

/** `machineAuth.spiffe` as written (the schema checked its shape). */
export interface SpiffeMachineAuthConfig extends JwksConfig {
  readonly trustDomains: readonly {
    readonly name: string;
    readonly bundleFile?: string;
    readonly bundleEndpoint?: {
      readonly url: string;
      readonly profile: string;
      readonly caFile?: string;
      readonly endpointSpiffeId?: string;
      readonly bootstrapBundleFile?: string;
    };
  }[];
  readonly audience?: string;
  readonly maxLifetime?: string | number;
}

const HTTPS_URL = { pattern: "^https://\\S+$", "x-message": "must be an https URL" } as const;

/** `machineAuth.spiffe` in bootseal.yaml; absent: no SPIFFE logins. */
export const SPIFFE_MACHINE_AUTH_SCHEMA: SchemaNode = {
  type: "object",
  additionalProperties: false,
  required: ["trustDomains"],
  description: "verifying JWT-SVIDs (`bootseal fetch --auth spiffe`); without it SPIFFE logins are off",
  properties: {
    trustDomains: {
      type: "array",
      minItems: 1,
      description:
        "the trust domains whose JWT-SVIDs are accepted: `{name, bundleEndpoint: {url, profile, caFile, endpointSpiffeId, bootstrapBundleFile}}` or `{name, bundleFile}`",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["name"],
        properties: {
          name: text("the trust domain name (`example.org`)", {
            pattern: TRUST_DOMAIN.source,
            "x-message": "must be a trust domain name (lower-case letters, digits, `.`, `-`, `_`)",
          }),
          bundleFile: text("a SPIFFE bundle (JWKS) file, read again at every refresh"),
          bundleEndpoint: {
            type: "object",
            additionalProperties: false,
            required: ["url", "profile"],
            description: "the trust domain's SPIFFE bundle endpoint",
            properties: {
              url: text("the bundle endpoint URL", HTTPS_URL),
              profile: {
                type: "string",
                enum: SPIFFE_PROFILES,
                "x-message": `unknown profile {value} (one of ${SPIFFE_PROFILES.join(", ")})`,
                description:
                  "how the endpoint authenticates: `https_web` (Web PKI) or `https_spiffe` (an X509-SVID)",
              },
              caFile: text("https_web: PEM file of the CAs that sign the endpoint's certificate", {
                "x-doc-default": "the system's roots",
              }),
              endpointSpiffeId: text("https_spiffe: the SPIFFE ID of the endpoint's X509-SVID"),
              bootstrapBundleFile: text(
                "https_spiffe: the trust domain's bundle that authenticates the endpoint before the first fetch",
              ),
            },
          },
        },
      },
    },
    audience: text("the `aud` the JWT-SVIDs carry when it is not the service's audience", {
      "x-doc-default": "the service's audience",
    }),
    maxLifetime: duration(
      "the longest a JWT-SVID may still be valid when it arrives (`exp` from now); a longer-lived one is refused",
      "1h",
    ),
    ...JWKS_SCHEMA_PROPERTIES,
  },
};

function usage(where: string, message: string): BootsealError {
  return new BootsealError("USAGE", `${where}: ${message}`);
}

function resolveSource(
  td: SpiffeMachineAuthConfig["trustDomains"][number],
  where: string,
): SpiffeBundleSource {
  const endpoint = td.bundleEndpoint;
  if ((td.bundleFile === undefined) === (endpoint === undefined)) {
    throw usage(where, "needs exactly one of bundleFile and bundleEndpoint");
  }
  if (endpoint === undefined) return { kind: "file", path: td.bundleFile as string };
  const at = `${where}.bundleEndpoint`;
  let url: URL;
  try {
    url = new URL(endpoint.url);
  } catch {
    throw usage(`${at}.url`, "must be an https URL");
  }
  if (url.protocol !== "https:") throw usage(`${at}.url`, "must be an https URL");
  if (endpoint.profile === "https_web") {
    if (endpoint.endpointSpiffeId !== undefined || endpoint.bootstrapBundleFile !== undefined) {
      throw usage(at, "endpointSpiffeId and bootstrapBundleFile belong to profile https_spiffe");
    }
    return endpoint.caFile === undefined
      ? { kind: "https_web", url }
      : { kind: "https_web", url, caFile: endpoint.caFile };
  }
  if (endpoint.profile !== "https_spiffe") {
    throw usage(`${at}.profile`, `unknown profile (one of ${SPIFFE_PROFILES.join(", ")})`);
  }
  if (endpoint.caFile !== undefined) throw usage(at, "caFile belongs to profile https_web");
  const id = endpoint.endpointSpiffeId === undefined ? null : parseSpiffeId(endpoint.endpointSpiffeId);
  if (id === null) throw usage(`${at}.endpointSpiffeId`, "https_spiffe needs the endpoint's SPIFFE ID");
  if (endpoint.bootstrapBundleFile === undefined) {
    throw usage(`${at}.bootstrapBundleFile`, "https_spiffe needs the trust domain's bundle to start from");
  }
  return { kind: "https_spiffe", url, endpointId: id.id, bootstrapBundleFile: endpoint.bootstrapBundleFile };
}

export function resolveSpiffeMachineAuth(
  config: SpiffeMachineAuthConfig,
  where = "machineAuth.spiffe",
): SpiffeMachineAuth {
  const list = config.trustDomains ?? [];
  if (list.length === 0) throw usage(`${where}.trustDomains`, "needs at least one trust domain");
  const seen = new Set<string>();
  const trustDomains = list.map((td, i) => {
    const at = `${where}.trustDomains[${i}]`;
    if (typeof td.name !== "string" || !TRUST_DOMAIN.test(td.name)) {
      throw usage(`${at}.name`, "must be a trust domain name (lower-case letters, digits, `.`, `-`, `_`)");
    }
    if (seen.has(td.name)) throw usage(`${at}.name`, "names a trust domain listed before");
    seen.add(td.name);
    return { name: td.name, source: resolveSource(td, at) };
  });
  const maxLifetimeMs =
    config.maxLifetime === undefined
      ? 3600_000
      : parseDuration(config.maxLifetime, `${where}.maxLifetime`, { min: 1000 });
  return {
    trustDomains,
    ...(config.audience === undefined ? {} : { audience: config.audience }),
    maxLifetimeMs,
    ...jwksTimings(config, where),
  };
}
