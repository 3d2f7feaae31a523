/**
 * The JSON Schema vocabulary of the service configuration (service-config-schema.ts and the
 * machine-login parts in machine-auth-jwt.ts): the node type, its annotations, and the
 * helpers for the kinds of node they share (text, integer, duration, http(s) URL), so a rule
 * or its wording is written once.
 *
 * Annotations next to JSON Schema's own keywords (registered with Ajv as a vocabulary):
 * - `x-doc-default`: the default column when it is not the schema's `default` (derived or
 *   taken from elsewhere, e.g. the AWS variables);
 * - `x-flag`: the `bootseal serve` flag that also sets the key;
 * - `x-message`: the error for a value of the right type that breaks a rule (pattern, enum,
 *   minItems); `{value}` is the offending value as JSON.
 */

export const ANNOTATIONS = ["x-doc-default", "x-flag", "x-message"] as const;

/** The subset of JSON Schema the configuration uses, with the annotations above. */
export interface SchemaNode {
  readonly type?: string | readonly string[];
  readonly description?: string;
  readonly default?: unknown;
  readonly properties?: Readonly<Record<string, SchemaNode>>;
  readonly additionalProperties?: boolean;
  readonly required?: readonly string[];
  readonly items?: SchemaNode;
  readonly enum?: readonly unknown[];
  readonly pattern?: string;
  readonly minLength?: number;
  readonly minItems?: number;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly "x-doc-default"?: string;
  readonly "x-flag"?: string;
  readonly "x-message"?: string;
}

/** A non-empty string. */
export const text = (description: string, extra: Partial<SchemaNode> = {}): SchemaNode => ({
  type: "string",
  minLength: 1,
  description,
  ...extra,
});

export const int = (description: string, minimum: number, maximum: number, dflt: number): SchemaNode => ({
  type: "integer",
  minimum,
  maximum,
  default: dflt,
  description,
});

/** A duration as src/duration.ts reads it; the resolution checks its bounds. */
export const duration = (description: string, dflt: string): SchemaNode => ({
  type: ["string", "number"],
  default: dflt,
  description: `${description} (a duration: \`30s\`, \`2m\`; a bare number is seconds)`,
});

/** An http(s) URL: the pattern and its message, to spread into a string node. */
export const HTTP_URL = { pattern: "^https?://\\S+$", "x-message": "must be an http(s) URL" } as const;
