/**
 * The one schema of the service configuration: every key of `bootseal.yaml`, its type, its
 * bounds, its default (Ajv fills them: useDefaults) and its documentation. The same object
 * drives validation (service-config.ts), the BOOTSEAL_* variables (one rule, envName below)
 * and the reference table of docs/configuration.md (scripts/config-docs.ts); a key added here
 * is validated, settable from the environment and documented at once. Its node type, the
 * annotations (`x-doc-default`, `x-flag`, `x-message`) and the shared node helpers are in
 * schema-node.ts.
 */
import { oneOf, STORE_SCHEMES, storeUrlExamples } from "../../providers/stores/index.ts";
import { MAX_DOCUMENT_BYTES } from "../limits.ts";
import { CLOUD_AUTH_METHODS } from "../machine/identity-login.ts";
import { AZURE_MACHINE_AUTH_SCHEMA, GCP_MACHINE_AUTH_SCHEMA } from "./machine-auth-jwt.ts";
import { SPIFFE_MACHINE_AUTH_SCHEMA } from "./machine-auth-spiffe.ts";
import { duration, HTTP_URL, int, type SchemaNode, text } from "./schema-node.ts";

export const SCOPES = ["configs:write", "configs:read", "status:read", "tokens:mint", "admin"] as const;
export const ONE_TIME_MODES = ["off", "after-success", "after-first-fetch"] as const;
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/** Each store scheme's settings, as its section (`s3:`), named by its options key. */
function storeSettingsSections(): Record<string, SchemaNode> {
  const sections: Record<string, SchemaNode> = {};
  for (const { optionsKey, settings } of STORE_SCHEMES) {
    if (settings === undefined) continue;
    sections[optionsKey] = { type: "object", additionalProperties: false, default: {}, ...settings };
  }
  return sections;
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function scopeList(): SchemaNode {
  return {
    type: "array",
    minItems: 1,
    description: `scopes granted in \`namespaces\`: ${SCOPES.join(", ")} (\`admin\` implies all)`,
    "x-message": `must list at least one of ${SCOPES.join(", ")}`,
    items: {
      type: "string",
      enum: SCOPES,
      "x-message": `unknown scope {value} (one of ${SCOPES.join(", ")})`,
    },
  };
}

/** Namespace names, or globs where `*` stands for any run of label characters. */
function namespaceList(): SchemaNode {
  return {
    type: "array",
    minItems: 1,
    default: ["*"],
    description: "the namespaces the scopes apply in: names or globs (`team-*`; `*` is every namespace)",
    "x-message": "must list at least one namespace or glob",
    items: {
      type: "string",
      pattern: "^[-a-z0-9*]{1,63}$",
      "x-message": "{value} is not a namespace or glob (lower-case letters, digits, '-', '*')",
    },
  };
}
const SHA256 = "^[0-9a-fA-F]{64}$";

const sha512 = text(
  "its SHA-512, hex: Ignition stubs pin it (`verification.hash`); without it they answer 501",
  {
    pattern: "^[0-9a-fA-F]{128}$",
    "x-message": "must be 128 hex digits",
  },
);

/** `fetcherArtifact` and `fetcherArtifactWindows` have the same fields; `os` words the docs. */
function artifact(os: "Linux" | "Windows"): SchemaNode {
  const linux = os === "Linux";
  return {
    type: "object",
    additionalProperties: false,
    required: ["url", "sha256", "signatureUrl"],
    properties: {
      url: text(
        linux
          ? "where `cloud-init` and `ignition` user-data stubs download the **Linux** fetcher (`bootseal`)"
          : "where `powershell` user-data stubs download the **Windows** fetcher (`bootseal.exe`)",
        HTTP_URL,
      ),
      sha256: text(
        linux ? "its SHA-256, hex" : "its SHA-256, hex; must differ from `fetcherArtifact.sha256`",
        { pattern: SHA256, "x-message": "must be 64 hex digits" },
      ),
      // Only Ignition (Linux) pins a SHA-512 (verification.hash).
      ...(linux ? { sha512 } : {}),
      signatureUrl: text("its detached signature", HTTP_URL),
      publicKeyPem: text(
        linux
          ? "the signing public key, PEM (exactly one of `publicKeyPem` and `publicKeyFile`)"
          : "the signing public key, PEM (exactly one of `publicKeyPem` and `publicKeyFile`; may be the same key as Linux's)",
      ),
      publicKeyFile: text("a file holding that key, instead of `publicKeyPem`"),
    },
  };
}

export const SERVICE_CONFIG_SCHEMA: SchemaNode = {
  type: "object",
  additionalProperties: false,
  required: ["store", "creation_rules"],
  properties: {
    listen: text("`HOST:PORT` (`[::1]:7480` for IPv6; port 0 picks a free one)", {
      default: "127.0.0.1:7480",
      "x-flag": "--listen",
    }),
    publicUrl: text(
      "URL machines reach the service at: every user-data stub names it. Without it only a loopback listener makes stubs (with its own address); any other refuses (501 `UNSUPPORTED`), since a request's Host header is never trusted",
      {
        pattern: "^https?://[^\\s/]+(/\\S*)?$",
        "x-message": "must be an http(s) URL",
        "x-doc-default": "none (a loopback listener's own address)",
      },
    ),
    trustProxy: {
      // Items are checked as addresses after the schema, so that one message covers them.
      type: ["boolean", "string", "array"],
      default: false,
      description:
        "`true`, or the load balancers' addresses/CIDRs (list, or comma-separated): their `X-Forwarded-For` is believed, so per-address rate limiting of failed authentication and the audit log's `source` see the client, not the balancer. Leave off when clients connect directly: the header is then ignored, so it cannot be forged",
      "x-message": "must be true, false, or a list of IP addresses or CIDRs",
    },
    tls: {
      type: "object",
      additionalProperties: false,
      required: ["cert", "key"],
      properties: {
        cert: text("PEM certificate file; with `tls.key`, serve HTTPS"),
        key: text("PEM private key file"),
        clientCa: text("PEM CA: optional mutual TLS for controllers (below)"),
      },
    },
    store: text(
      storeUrlExamples()
        .map((example) => `\`${example}\``)
        .join(", "),
      {
        pattern: `^(${STORE_SCHEMES.map((s) => escapeRegExp(s.scheme)).join("|")})://`,
        "x-message": `must be ${oneOf(storeUrlExamples())}`,
        "x-flag": "--store",
      },
    ),
    ...storeSettingsSections(),
    creation_rules: {
      type: "array",
      minItems: 1,
      description:
        "same shape as `.sops.yaml` `creation_rules`; `path_regex` is matched against `<ns>/<name>`",
      "x-message": "needs at least one rule (same shape as .sops.yaml creation_rules)",
    },
    controllers: {
      type: "array",
      default: [],
      "x-doc-default": "— (required unless `kubernetesBindings` has entries)",
      description:
        'list of `{name, tokenSha256, scopes, namespaces}` (docs/security.md, "Controllers"); may be empty when `kubernetesBindings` has entries. Reloaded live (SIGHUP, file change)',
      "x-message": "needs at least one controller ({name, tokenSha256, scopes})",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["name", "scopes"],
        properties: {
          name: text("appears in the audit log; a client certificate's CN with `tls.clientCa`"),
          tokenSha256: text("SHA-256 of the bearer token, hex", {
            pattern: SHA256,
            "x-message": "must be 64 hex digits (sha256sum of the token)",
          }),
          scopes: scopeList(),
          namespaces: namespaceList(),
        },
      },
    },
    kubernetesBindings: {
      type: "array",
      description:
        'list of `{serviceAccount: "ns/name" | "ns/*", scopes, namespaces}`: what a Kubernetes ServiceAccount token (checked by `controllerAuth.kubernetes`) may do; every binding that matches adds its grant. Reloaded live',
      default: [],
      "x-doc-default": "none",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["serviceAccount", "scopes"],
        properties: {
          serviceAccount: text("`NAMESPACE/NAME`, or `NAMESPACE/*` for every ServiceAccount of a namespace", {
            pattern: "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/(\\*|[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?)$",
            "x-message": "must be NAMESPACE/NAME or NAMESPACE/* (got {value})",
          }),
          scopes: scopeList(),
          namespaces: namespaceList(),
        },
      },
    },
    controllerAuth: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        kubernetes: {
          type: "object",
          additionalProperties: false,
          required: ["server", "tokenFile"],
          properties: {
            server: text("the Kubernetes API server that reviews ServiceAccount tokens (TokenReview)", {
              pattern: "^https://\\S+$",
              "x-message": "must be an https URL",
            }),
            caFile: text("PEM CA of the API server", { "x-doc-default": "the system's CAs" }),
            tokenFile: text(
              "the reviewer's own bearer token (re-read on every review, so a projected token rotates); needs `system:auth-delegator`",
            ),
            audiences: {
              type: "array",
              minItems: 1,
              description:
                "audiences a controller's token must be bound to (`TokenRequest` audiences); absent: the API server's own",
              items: text("an audience"),
            },
            cacheTtl: duration(
              "how long a positive review is reused for the same token (at most `5m`; never past the token's `exp`)",
              "10s",
            ),
          },
        },
      },
    },
    bootstrapToken: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        ttl: {
          type: ["string", "number"],
          // One boot, not a day: docs/security.md "Defaults and why" (`24h` was the old default).
          default: "2h",
          description:
            "lifetime of a bootstrap token from its minting (publish or user data): `90m`, `1h30m`, `7d`, `30s`; a bare number is seconds; at least `1s`. Long enough for one boot; `24h` keeps the old default",
        },
        uses: int("configuration fetches one token allows (fetcher retries count)", 1, 1_000_000, 10),
        derivationKeyFile: text(
          "a file of at least 32 random bytes, binary or text (a text key's trailing line break is not part of it; a service secret, mode 0600, shared by every replica): a publish then DERIVES its token from it, so `GET …/userdata` gives the same stub every time and writes nothing. Without it `GET …/userdata` answers 409 and `POST …/userdata` mints",
          {
            "x-doc-default":
              "— (embedded default: `<data-dir>/keys/bootstrap-token-derivation.key`, generated)",
          },
        ),
      },
    },
    bootstrapCommands: {
      type: "array",
      default: [],
      "x-doc-default": "none",
      description:
        "list of `{match, command}`: the bootstrap command the user-data stub passes to `bootseal fetch --exec` for machines whose `<ns>/<name>` matches (`match`: a regular expression as `creation_rules`' `path_regex`; the first match wins). A publish's `X-Bootseal-Bootstrap-Command` header takes precedence",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["match", "command"],
        properties: {
          match: text("regular expression over `<ns>/<name>`"),
          command: text("the command, run by `sh -c` (Linux) or `cmd /c` (Windows) after the files"),
        },
      },
    },
    artifacts: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        dir: text(
          "where the service finds the fetcher executables it serves at `/v1/artifacts/` (`bootseal-linux-x64`, `bootseal-linux-arm64`, `bootseal-windows-x64.exe`, as `npm run build:sea` writes them); only those present are served",
          {
            "x-doc-default":
              'the package\'s `sea/` (an npm install has none: docs/cli.md, "Install from the package"); in the single executable, the directory it is in',
          },
        ),
        signingKeyFile: text(
          "the Ed25519 private key (PKCS#8 PEM) the service signs them with; generated (mode 0600) on first start when missing",
          { "x-doc-default": "`<dataDir>/keys/artifact-signing.pem`" },
        ),
      },
    },
    oneTimeFetch: {
      type: "string",
      enum: ONE_TIME_MODES,
      default: "after-success",
      description:
        "`off`, `after-success`, `after-first-fetch` (docs/api.md): with `after-success` the config is deleted when the machine reports `succeeded` (its token, bound to that config, fetches nothing after); `off` keeps both until the token expires (the old default)",
    },
    limits: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        bodyBytes: int("largest publish body, bytes (413 above)", 1024, MAX_DOCUMENT_BYTES, 1024 * 1024),
        headersTimeout: duration(
          "time a client has to send the request line and headers; then 408 and closed. At least `1s`, at most `limits.requestTimeout`",
          "10s",
        ),
        requestTimeout: duration(
          "time a client has to send the whole request, headers and body; then 408 and closed. At least `1s`; the answer's time is not counted",
          "60s",
        ),
        idleTimeout: duration("an idle keep-alive connection is closed after this; at least `1s`", "5s"),
        maxConnections: int(
          "open connections in total; more are answered 503 and closed at once (`0`: no cap; keep it below the process's descriptor limit)",
          0,
          1_000_000,
          512,
        ),
        maxConnectionsPerAddress: int(
          "open connections from one peer address; more are answered 503 and closed (`0`: no cap). The balancers listed in `trustProxy` are not counted; with `trustProxy: true` this cap is off",
          0,
          1_000_000,
          64,
        ),
      },
    },
    rateLimit: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        authFailuresPerMinute: int(
          "failed authentications per minute per credential, per machine named and per source address before a failure is answered 429 (a credential that verifies is never refused)",
          1,
          1_000_000,
          20,
        ),
      },
    },
    machineAuth: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        audience: text(
          "this service's identity in machine logins: the value AWS logins sign in `x-bootseal-server-id`, the audience GCP and Azure tokens and JWT-SVIDs carry (`bootseal fetch --server-id`)",
          { "x-doc-default": "the origin of `publicUrl`" },
        ),
        tokenTtl: duration("lifetime of the bootstrap token a machine login mints; at least `1s`", "1h"),
        aws: {
          type: "object",
          additionalProperties: false,
          default: {},
          properties: {
            stsEndpoint: text(
              "the STS endpoint signed `GetCallerIdentity` requests are sent to (never one a machine names)",
              { ...HTTP_URL, "x-doc-default": "`https://sts.<region>.amazonaws.com`" },
            ),
            region: text("the region AWS logins are signed for", { default: "us-east-1" }),
          },
        },
        // Google's keys by default: GCP logins need only bindings.
        gcp: { ...GCP_MACHINE_AUTH_SCHEMA, default: {} },
        azure: AZURE_MACHINE_AUTH_SCHEMA,
        spiffe: SPIFFE_MACHINE_AUTH_SCHEMA,
        tpm: {
          type: "object",
          additionalProperties: false,
          description: 'TPM logins (docs/api.md "Machine login")',
          properties: {
            ekCaFile: {
              type: "string",
              description: "PEM bundle of the EK CAs an EK certificate must chain to",
            },
            challengeTtl: {
              type: ["string", "integer"],
              description: "how long a login challenge (its nonce) stays usable; default 2m",
            },
          },
        },
        bindings: {
          type: "array",
          default: [],
          description:
            'list of `{method, match, machines, instanceIdFromSession, pcrs, eventLog}`: which cloud identities may log in as which machines (docs/api.md "Machine login")',
          items: {
            type: "object",
            additionalProperties: false,
            required: ["method", "match", "machines"],
            properties: {
              method: {
                type: "string",
                enum: CLOUD_AUTH_METHODS,
                "x-message": `unknown method {value} (one of ${CLOUD_AUTH_METHODS.join(", ")})`,
              },
              match: { type: "object", description: "attribute -> exact value or `*` glob" },
              machines: {
                type: ["string", "array"],
                description: "`ns/name`, `ns/*`, or a list of them",
                "x-message": "must be ns/name, ns/*, or a list of them",
              },
              instanceIdFromSession: {
                type: "boolean",
                description: "aws-iam: the machine's name is the EC2 instance id of the session",
              },
              pcrs: {
                type: "object",
                description: "tpm: PCR index -> expected sha256-bank value (hex); the quote must show them",
              },
              eventLog: {
                type: "object",
                additionalProperties: false,
                required: ["pcrs", "allowedDigests"],
                description:
                  "tpm: the machine sends its measured-boot event log; `pcrs` are replayed from it and must match the quote, and every event extended into them must have a sha256 digest in `allowedDigests`",
                properties: {
                  pcrs: { type: "array", items: { type: "integer" } },
                  allowedDigests: { type: "array", items: { type: "string" } },
                },
              },
            },
          },
        },
      },
    },
    fetcherArtifact: artifact("Linux"),
    fetcherArtifactWindows: artifact("Windows"),
    audit: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        path: text("audit log file, `-` for standard error", {
          default: "-",
          "x-doc-default": "`-` (embedded default: `<data-dir>/audit.log`)",
        }),
        mode: text(
          'the audit log file\'s permissions, octal in quotes; set on every start, so an existing log is tightened too (`"0644"` keeps the old mode)',
          {
            default: "0600",
            pattern: "^0?[0-7]{3}$",
            "x-message": 'must be an octal mode in quotes, e.g. "0600"',
          },
        ),
      },
    },
    events: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        heartbeatSeconds: int("SSE heartbeat interval", 1, 3600, 15),
        bufferSize: int("events kept per replica for `Last-Event-ID`", 1, 100_000, 1000),
      },
    },
    statusReports: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        coalesce: duration(
          "longest time a replica holds an intermediate status report (fetching, decrypted, written, running) before writing it; it answers such a report 202 and writes it with the machine's next terminal report if that comes first (docs/api.md, Status durability). `0`: every report is written before its answer (200)",
          "5s",
        ),
        maxHeldMachines: int(
          "most machines whose reports one replica holds at once; past it, reports are written through",
          1,
          1_000_000,
          50_000,
        ),
      },
    },
    metrics: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        phaseRefresh: duration(
          "how often a replica counts machines per phase for `bootseal_machines` (one listing of the status records, then reads of the records that changed), at most; a scrape in between gets the last count (docs/api.md, Metrics). `0`: every scrape counts",
          "30s",
        ),
      },
    },
    dataDir: text("the embedded default's directory", { default: "./data", "x-flag": "--data-dir" }),
    logLevel: {
      type: "string",
      enum: LOG_LEVELS,
      default: "info",
      description: "access-log level: `fatal` … `trace`, `silent`",
      "x-flag": "--log-level",
    },
  },
};

/**
 * The one rule from a key path to its variable: `BOOTSEAL_` and the path's segments, each
 * camelCase word split at its capitals, upper-cased and joined by `_`:
 * `rateLimit.authFailuresPerMinute` -> `BOOTSEAL_RATE_LIMIT_AUTH_FAILURES_PER_MINUTE`,
 * `creation_rules` -> `BOOTSEAL_CREATION_RULES`.
 */
export function envName(path: readonly string[]): string {
  return `BOOTSEAL_${path.map((p) => p.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase()).join("_")}`;
}

export interface ConfigLeaf {
  readonly path: readonly string[];
  readonly env: string;
  /** The variable's text is YAML (a list); otherwise it is the value as text. */
  readonly yaml: boolean;
  readonly schema: SchemaNode;
}

/** Every settable key: the leaves of the schema (an object with properties is not a leaf). */
export function configLeaves(node: SchemaNode = SERVICE_CONFIG_SCHEMA, path: string[] = []): ConfigLeaf[] {
  if (node.properties) {
    return Object.entries(node.properties).flatMap(([key, child]) => configLeaves(child, [...path, key]));
  }
  return [{ path, env: envName(path), yaml: node.type === "array", schema: node }];
}

/** The schema's default of one key (e.g. ["dataDir"] -> "./data"), for code that needs it before validation. */
export function schemaDefault(path: readonly string[]): unknown {
  let node: SchemaNode | undefined = SERVICE_CONFIG_SCHEMA;
  for (const key of path) node = node?.properties?.[key];
  return node?.default;
}
