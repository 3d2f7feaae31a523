/**
 * Checks a value against a schema of service-config-schema.ts with Ajv and words the first
 * problem as the operator reads it: `<key path>: <what is wrong>` in a USAGE error. Before
 * Ajv, text is normalized by the schema's types (variables are always text), and Ajv fills
 * the defaults (useDefaults), so the value that passes is the resolved one.
 */
import { Ajv, type ErrorObject } from "ajv";
import { BootsealError } from "../errors.ts";
import { ANNOTATIONS, type SchemaNode } from "./schema-node.ts";

type Raw = Record<string, unknown>;

function usage(where: string, message: string): BootsealError {
  return new BootsealError("USAGE", `${where}: ${message}`);
}

function isMapping(value: unknown): value is Raw {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const TRUE_WORDS = ["1", "true", "yes", "on"];
const FALSE_WORDS = ["0", "false", "no", "off"];

function types(node: SchemaNode): readonly string[] {
  return typeof node.type === "string" ? [node.type] : (node.type ?? []);
}

/**
 * What the schema's types cannot say about text from variables and YAML, done by type before
 * Ajv sees the value: null is absent, strings are trimmed, "42" is a number where an integer
 * is wanted and yes/no/on/off/1/0 a boolean where a boolean is. A copy; the input is kept.
 */
function normalize(value: unknown, node: SchemaNode): unknown {
  const t = types(node);
  if (Array.isArray(value))
    return node.items ? value.map((v) => normalize(v, node.items as SchemaNode)) : value;
  if (isMapping(value)) {
    if (!node.properties) return value;
    const out: Raw = {};
    for (const [key, v] of Object.entries(value)) {
      if (v === null || v === undefined) continue;
      const child = node.properties[key];
      out[key] = child ? normalize(v, child) : v;
    }
    return out;
  }
  if (typeof value !== "string") return value;
  const s = value.trim();
  if (t.includes("integer") && /^\d+$/.test(s)) return Number(s);
  if (t.includes("boolean")) {
    if (TRUE_WORDS.includes(s.toLowerCase())) return true;
    if (FALSE_WORDS.includes(s.toLowerCase())) return false;
  }
  return t.includes("string") ? s : value;
}

const ajv = new Ajv({ useDefaults: true, allowUnionTypes: true, verbose: true, allErrors: false });
ajv.addVocabulary([...ANNOTATIONS]);

/** "/controllers/0/scopes/1" -> "controllers[0].scopes[1]". */
function keyPath(pointer: string, extra?: string): string {
  const parts = pointer
    .split("/")
    .slice(1)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (extra !== undefined) parts.push(extra);
  return (
    parts.reduce((out, p) => (/^\d+$/.test(p) ? `${out}[${p}]` : out ? `${out}.${p}` : p), "") || "config"
  );
}

/** One Ajv error as the operator reads it: the key's path, then what is wrong with it. */
function describeError(e: ErrorObject): BootsealError {
  const node = (e.parentSchema ?? {}) as SchemaNode;
  const t = types(node);
  const custom = node["x-message"]?.replace("{value}", JSON.stringify(e.data));
  switch (e.keyword) {
    case "additionalProperties": {
      const allowed = Object.keys(node.properties ?? {}).join(", ");
      const key = (e.params as { additionalProperty: string }).additionalProperty;
      return usage(keyPath(e.instancePath, key), `unknown key (allowed: ${allowed})`);
    }
    case "required": {
      const key = (e.params as { missingProperty: string }).missingProperty;
      const child = node.properties?.[key];
      // A missing list reads as an empty one: say what it needs.
      const message = child?.minItems && child["x-message"] ? child["x-message"] : "is required";
      return usage(keyPath(e.instancePath, key), message);
    }
    case "type":
    case "minimum":
    case "maximum":
    case "minLength":
    case "minItems":
    case "enum":
    case "pattern":
      break;
    default:
      return usage(keyPath(e.instancePath), e.message ?? "is not valid");
  }
  const where = keyPath(e.instancePath);
  if (t.includes("integer"))
    return usage(where, `must be an integer from ${node.minimum} to ${node.maximum}`);
  // x-message words the key's rule; a wrong type of a one-type key or an empty string is generic.
  if (
    custom &&
    (["pattern", "enum", "minItems"].includes(e.keyword) || t.length > 1 || t.includes("array"))
  ) {
    return usage(where, custom);
  }
  if (node.enum) return usage(where, `must be one of ${node.enum.join(", ")}`);
  if (t.includes("boolean")) return usage(where, "must be true or false");
  if (t.includes("object")) return usage(where, "must be a mapping");
  if (t.includes("array")) return usage(where, "must be a list");
  if (t.includes("string")) return usage(where, "must be a non-empty string");
  return usage(where, e.message ?? "is not valid");
}

/**
 * A compiled check: returns a normalized copy of `value` with the defaults filled, or throws
 * the first problem as a USAGE error.
 */
export function schemaChecker(schema: SchemaNode): (value: unknown) => unknown {
  const validate = ajv.compile(schema as object);
  return (value) => {
    const normalized = normalize(value, schema);
    if (!validate(normalized)) throw describeError(validate.errors?.[0] as ErrorObject);
    return normalized;
  };
}
