/** JSON Schemas shared by the routes and the OpenAPI document. */
import { DNS_LABEL_MAX, DNS_LABEL_PATTERN } from "../../machine/machine-id.ts";

const dnsLabel = (what: string) =>
  ({
    type: "string",
    minLength: 1,
    maxLength: DNS_LABEL_MAX,
    pattern: DNS_LABEL_PATTERN,
    description: `${what}: a DNS-1123 label (lower case letters, digits and '-', at most 63)`,
  }) as const;

export const machineParams = {
  type: "object",
  properties: { ns: dnsLabel("namespace"), name: dnsLabel("machine name") },
  required: ["ns", "name"],
  additionalProperties: false,
} as const;

export const namespaceSchema = dnsLabel("namespace");

export const errorSchema = {
  type: "object",
  description: "Every error: a machine-readable code and a sentence",
  properties: { code: { type: "string" }, message: { type: "string" } },
  required: ["code", "message"],
} as const;

/** What each error status means, wherever a route can answer it (plugins/error-handler.ts maps codes). */
export const ERROR_STATUSES = {
  400: "BAD_INPUT (and the document codes MAC_MISMATCH, NO_MAC, NOT_ENCRYPTED, ...): the request is malformed or fails its schema",
  401: "UNAUTHORIZED, TOKEN_EXPIRED, TOKEN_EXHAUSTED: no valid credential",
  403: "FORBIDDEN: the credential may not do this (scope, namespace or machine)",
  404: "NOT_FOUND: no such machine, config or file",
  409: "ALREADY_FETCHED, MINT_REQUIRED (see the description)",
  412: "PRECONDITION_FAILED: If-Match or If-None-Match was not met",
  413: "TOO_LARGE: the body is over the limit",
  415: "UNSUPPORTED_MEDIA_TYPE: the body is not application/json",
  429: "RATE_LIMITED: too many failed authentications; wait Retry-After seconds",
  501: "UNSUPPORTED: not configured here (machine login off, a stub whose executable is not served)",
  503: "STORE_UNAVAILABLE, KEY_UNAVAILABLE: a dependency does not answer; retry after Retry-After seconds",
} as const;

export type ErrorStatus = keyof typeof ERROR_STATUSES;

/** Retry-After (seconds), on 429 and 503 answers. */
const retryAfter = { "retry-after": { type: "integer", description: "seconds to wait before retrying" } };

/**
 * The error responses of a route: the statuses it can answer, each with the `{code, message}`
 * schema, and `4xx`/`5xx` for the rest (the HTTP edge's 408 and 431, 500 and 502). Each status is
 * its own small fast-json-stringify serializer; all share the one schema.
 */
export function errorResponses<const S extends readonly ErrorStatus[]>(...statuses: S) {
  const out: Record<string, unknown> = {};
  for (const s of statuses) {
    out[s] = {
      ...errorSchema,
      description: ERROR_STATUSES[s],
      ...(s === 429 || s === 503 ? { headers: retryAfter } : {}),
    };
  }
  out["4xx"] = {
    ...errorSchema,
    description: "another client error (408 REQUEST_TIMEOUT, 431 TOO_LARGE head)",
  };
  out["5xx"] = {
    ...errorSchema,
    description: "a server-side failure (500 INTERNAL, 502 KEY_ACCESS_DENIED or STORE_FORBIDDEN)",
  };
  return out as { readonly [K in S[number] | "4xx" | "5xx"]: typeof errorSchema & { description: string } };
}

/** The errors every route that takes a controller or machine token can answer. */
export const AUTH_ERRORS = [400, 401, 403, 429, 503] as const;
