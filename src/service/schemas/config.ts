/** Schemas of the config routes (publish, fetch, delete) and the user-data stub. */
import { AUTH_ERRORS, errorResponses, machineParams } from "./common.ts";

/** A Kubernetes object name (DNS-1123 subdomain): what a Cluster API reference may be. */
const kubeName = (what: string) =>
  ({
    type: "string",
    minLength: 1,
    maxLength: 253,
    pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    description: `the Cluster API ${what} this publish is for (shown by the fleet page and the list)`,
  }) as const;

export const publishQuery = {
  type: "object",
  properties: {
    format: {
      type: "string",
      enum: ["yaml", "json"],
      description: "publish a YAML or JSON payload with visible keys instead of the byte-exact binary store",
    },
    capiCluster: kubeName("Cluster"),
    capiMachine: kubeName("Machine"),
    capiBootsealConfig: kubeName("BootsealConfig"),
  },
  additionalProperties: false,
} as const;

export const publishResponse = {
  type: "object",
  properties: {
    version: { type: "integer", description: "per-machine publish counter (1, 2, ...)" },
    etag: { type: "string", description: "ETag of the stored document, for If-Match" },
    sha256: { type: "string", description: "SHA-256 (hex) of the stored ENCRYPTED document" },
    bootstrapToken: {
      type: "string",
      description: "the machine's bootstrap token; shown only here, and only to a caller with tokens:mint",
    },
    tokenExpiresAt: { type: "string", format: "date-time" },
  },
  required: ["version", "etag", "sha256"],
} as const;

export const publishSchema = {
  summary: "Publish a machine's config",
  description:
    "Body: the plaintext payload (any content type; encrypted into the binary store, or yaml/json with ?format), " +
    "or an already-encrypted SOPS document with Content-Type application/sops+json or application/sops+yaml. " +
    "If-None-Match: * creates only; If-Match: <etag> replaces exactly that version. Mints a new bootstrap token.",
  operationId: "publishConfig",
  tags: ["configs"],
  params: machineParams,
  querystring: publishQuery,
  headers: {
    type: "object",
    properties: {
      "if-match": { type: "string", description: "replace exactly this version (its ETag); else 412" },
      "if-none-match": { type: "string", enum: ["*"], description: "`*`: create only; else 412" },
      "x-bootseal-bootstrap-command": {
        type: "string",
        description: "the command the fetcher runs after writing the files (overrides bootstrapCommands)",
      },
      "x-bootseal-tpm-ek": {
        type: "string",
        description:
          "the machine's TPM endorsement key (SubjectPublicKeyInfo, base64 DER): the creation rule's `tpm_ek: publish` keys seal the data key to it",
      },
      "x-bootseal-tpm-pcrs": {
        type: "string",
        description:
          "with x-bootseal-tpm-ek: `PCR=SHA256HEX[,…]`, the PCR policy the sealed key needs (in place of the rule's)",
      },
    },
  },
  response: {
    200: { ...publishResponse, description: "Replaced: a new version of the machine's config." },
    201: { ...publishResponse, description: "Created: the machine's first config." },
    ...errorResponses(...AUTH_ERRORS, 412, 413),
  },
} as const;

/**
 * The body of a publish, for the OpenAPI document only: the route takes raw bytes of any type
 * (one buffer parser, no body validation), so this is put in by the route's `swaggerTransform`.
 */
export const publishRequestBody = {
  description:
    "The plaintext payload (any content type other than the two SOPS ones; encrypted into the binary " +
    "store, or yaml/json with ?format), or an already-encrypted SOPS document",
  content: {
    "application/octet-stream": { schema: { type: "string", format: "binary" } },
    "text/plain": { schema: { type: "string" } },
    "application/sops+json": {
      schema: {
        type: "object",
        description: "an encrypted SOPS JSON document",
        required: ["sops"],
        properties: { sops: { type: "object", description: "the SOPS metadata" } },
      },
    },
    "application/sops+yaml": { schema: { type: "string", description: "an encrypted SOPS YAML document" } },
  },
} as const;

export const fetchSchema = {
  summary: "Fetch a machine's encrypted config",
  description:
    "Machine (its bootstrap token; each fetch uses one of the token's fetches) or controller (configs:read). " +
    "Body: the SOPS document (application/sops+json or application/sops+yaml), with ETag; If-None-Match gives 304. " +
    "With oneTimeFetch after-first-fetch only the first machine fetch gets the body: every other one, " +
    "concurrent or later, is 409 ALREADY_FETCHED.",
  operationId: "getConfig",
  tags: ["configs"],
  params: machineParams,
  headers: {
    type: "object",
    properties: { "if-none-match": { type: "string", description: "an ETag: 304 when it is still current" } },
  },
  response: {
    200: {
      description: "the encrypted SOPS document",
      headers: {
        etag: { type: "string", description: "for If-None-Match and a publish's If-Match" },
        "x-bootseal-format": {
          type: "string",
          enum: ["binary", "json", "yaml"],
          description: "its SOPS store",
        },
      },
      content: {
        "application/sops+json": {
          schema: {
            type: "object",
            description: "a SOPS JSON document (binary and json stores)",
            required: ["sops"],
            properties: { sops: { type: "object", description: "the SOPS metadata" } },
          },
        },
        "application/sops+yaml": { schema: { type: "string", description: "a SOPS YAML document" } },
      },
    },
    304: { description: "not modified", type: "null" },
    ...errorResponses(...AUTH_ERRORS, 404, 409),
  },
} as const;

export const deleteSchema = {
  summary: "Delete a machine's config and bootstrap token",
  description:
    "The machine's own DELETE (one-time fetch on, after it reported succeeded) is idempotent: 204 also " +
    "when the service already deleted the config (after-success).",
  operationId: "deleteConfig",
  tags: ["configs"],
  params: machineParams,
  response: { 204: { description: "deleted", type: "null" }, ...errorResponses(...AUTH_ERRORS, 404) },
} as const;

const userdataQuery = {
  type: "object",
  properties: {
    format: { type: "string", enum: ["cloud-init", "ignition", "powershell"] },
    arch: {
      type: "string",
      enum: ["x64", "arm64"],
      default: "x64",
      description: "the Linux executable's architecture (cloud-init, ignition); powershell is x64",
    },
    skipModule: {
      type: "array",
      items: { type: "string", pattern: "^[a-z][a-z_]{0,31}$" },
      maxItems: 16,
      description:
        "a cloud-config module the machine's fetch skips (`bootseal fetch --skip-module`), repeatable: what a BootsealConfig's `skipModules` names",
    },
  },
  required: ["format"],
  additionalProperties: false,
} as const;

/** The stub, in the content type of its format (userdata/index.ts). */
const userdataStub = {
  description: "the stub, in its format's content type",
  headers: {
    "x-bootseal-token-expires-at": {
      type: "string",
      format: "date-time",
      description: "when the stub's bootstrap token expires",
    },
  },
  content: {
    "text/cloud-config": { schema: { type: "string", description: "format=cloud-init" } },
    "application/vnd.coreos.ignition+json": {
      schema: {
        type: "object",
        description: "format=ignition: an Ignition config",
        required: ["ignition"],
        properties: { ignition: { type: "object", properties: { version: { type: "string" } } } },
      },
    },
    "text/x-powershell": { schema: { type: "string", description: "format=powershell" } },
  },
} as const;

export const userdataSchema = {
  summary: "The user-data stub of the published version (safe: the same bytes every time, nothing written)",
  description:
    "Renders the stub again from the publish: its token was derived from the service's derivation key, so " +
    "two GETs give byte-identical stubs and a republish a new one. 409 MINT_REQUIRED without a derivation " +
    "key (or after a POST minted the current token): POST mints. Needs `tokens:mint` (the stub reveals a token).",
  operationId: "getUserdata",
  tags: ["configs"],
  params: machineParams,
  querystring: userdataQuery,
  response: { 200: userdataStub, ...errorResponses(...AUTH_ERRORS, 404, 409, 501) },
} as const;

export const userdataMintSchema = {
  summary: "Mint a FRESH bootstrap token and render it into a user-data stub",
  description:
    "The explicit mint: the previous token stops working (the service keeps only hashes). Needs `tokens:mint`.",
  operationId: "mintUserdata",
  tags: ["configs"],
  params: machineParams,
  querystring: userdataQuery,
  response: { 200: userdataStub, ...errorResponses(...AUTH_ERRORS, 404, 501) },
} as const;
