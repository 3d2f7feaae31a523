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

/** Error responses of every route: the schema also strips anything unlisted. */
export const errorResponses = { "4xx": errorSchema, "5xx": errorSchema } as const;

export const bearerSecurity = [{ bearer: [] }] as const;
