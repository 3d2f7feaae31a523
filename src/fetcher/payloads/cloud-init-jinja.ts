/**
 * A `## template: jinja` user-data rendered as cloud-init 22.4.2 renders it
 * (cloudinit/handlers/jinja_template.py, cloudinit/templater.py with Jinja2 3.1), down to the
 * part Cluster API's templates use: variable substitution, `{{ ds.meta_data.local_hostname }}`.
 *
 *   header     the first line is `##<blanks>template:<text>` with <text> stripped and lowered
 *              `jinja` (detect_template); it is dropped, the rest is the template
 *   variables  cloud-init's instance data (<root>/run/cloud-init/instance-data-sensitive.json,
 *              else instance-data.json), converted as convert_jinja_instance_data does: keys
 *              sorted, `base64-encoded-keys` decoded, a `v<N>` map's keys copied to its parent,
 *              and every key with a Jinja operator (`-`, `.`, `/`, `:` …) also under a name
 *              with each operator replaced by `_`
 *   `{{ a.b }}` a name, then `.name` lookups (white space anywhere between); a string, number,
 *              boolean or null renders as Python's str() does; an undefined variable renders
 *              as `CI_MISSING_JINJA_VAR/<last name>` (with a warning); a lookup into an
 *              undefined one makes cloud-init drop the whole user-data: refused
 *   text       newlines normalised to `\n`, as Jinja's lexer does, the final one kept
 *
 * Everything else Jinja would do (`{% %}`, `{# #}`, filters, calls, subscripts, literals,
 * operators, whitespace control, Python attributes such as `.items`) is refused with BAD_INPUT
 * naming the construct; messages name variables, never other payload text.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { BootsealError } from "../../errors.ts";
import { MAX_DOCUMENT_BYTES } from "../../limits.ts";
import { type PyValue, pyB64decode, pyStr } from "./cloud-init-values.ts";
import { afterJinjaHeader, isCloudConfigStart } from "./kind.ts";

/** Where cloud-init keeps its instance data; the sensitive one is what its part handler reads. */
export const INSTANCE_DATA_FILES = [
  "/run/cloud-init/instance-data-sensitive.json",
  "/run/cloud-init/instance-data.json",
] as const;

/** templater.MISSING_JINJA_PREFIX. */
export const MISSING_JINJA_PREFIX = "CI_MISSING_JINJA_VAR/";

/** A `{{ … }}` that is a variable: its names, first the variable's own. */
export interface JinjaVariable {
  readonly names: readonly string[];
}

export type TemplatePiece = string | JinjaVariable;

/** str.isspace(): Python's \s, strip() and Jinja's whitespace_re. */
const PY_SPACE =
  "\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const HEADER = new RegExp(`^##[${PY_SPACE}]*template:(.*)`, "i");
const STRIP = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, "g");
const BLANKS = new RegExp(`[${PY_SPACE}]*`, "y");
const NAME = /[A-Za-z_][A-Za-z0-9_]*/y;
/** jinja2.lexer.operator_re: what get_jinja_variable_alias replaces with `_`. */
const OPERATORS = /\/\/|\*\*|==|!=|>=|<=|\+|-|\/|\*|%|~|\[|\]|\(|\)|\{|\}|>|<|=|\.|:|\||,|;/g;
/** re.match(r"v\d+$", key): Unicode digits, `$` also before a final newline. */
const VERSION_KEY = /^v\p{Nd}+\n?$/u;

/** Names Jinja's parser or context gives a meaning of its own at the start of `{{ }}`. */
const JINJA_NAMES = new Set("and else if in is not or self true false none True False None".split(" "));
/** The environment's globals: what such a name is when the instance data has no such key. */
const JINJA_GLOBALS = new Set("range dict lipsum cycler joiner namespace".split(" "));

/** Public attributes of the Python types instance data holds: Jinja's getattr finds them first. */
const INT_ATTRS =
  "as_integer_ratio bit_count bit_length conjugate denominator from_bytes imag numerator real to_bytes";
const PY_ATTRS: Readonly<Record<string, ReadonlySet<string>>> = {
  dict: new Set("clear copy fromkeys get items keys pop popitem setdefault update values".split(" ")),
  list: new Set("append clear copy count extend index insert pop remove reverse sort".split(" ")),
  str: new Set(
    (
      "capitalize casefold center count encode endswith expandtabs find format format_map index isalnum " +
      "isalpha isascii isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle isupper " +
      "join ljust lower lstrip maketrans partition removeprefix removesuffix replace rfind rindex rjust " +
      "rpartition rsplit rstrip split splitlines startswith strip swapcase title translate upper zfill"
    ).split(" "),
  ),
  int: new Set(INT_ATTRS.split(" ")),
  float: new Set("as_integer_ratio conjugate fromhex hex imag is_integer real".split(" ")),
  NoneType: new Set(),
};

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `cloud-config: Jinja template: ${message}`);
}

/** A variable's names as written, for messages (names only: [A-Za-z0-9_.]). */
function shownVariable(names: readonly string[]): string {
  const text = names.join(".");
  return `{{ ${text.length > 80 ? `${text.slice(0, 80)}…` : text} }}`;
}

/**
 * The template after a `## template: jinja` first line (detect_template), or null when the
 * text is not a Jinja template by cloud-init's user-data test (after leading blanks).
 */
export function jinjaTemplateBody(text: string): string | null {
  if (afterJinjaHeader(text) === null) return null;
  const newline = text.indexOf("\n");
  const ident = newline === -1 ? text : text.slice(0, newline);
  const match = HEADER.exec(ident);
  if (!match || (match[1] as string).toLowerCase().replace(STRIP, "") !== "jinja") {
    throw bad(
      "the first line must be exactly the `## template: jinja` header (cloud-init 22.4 does not render it otherwise)",
    );
  }
  return newline === -1 ? "" : text.slice(newline + 1);
}

/** What a `{{` that is not a plain variable starts, for the refusal. */
function construct(ch: string | undefined, next: string | undefined): string {
  if (ch === undefined) return "an unclosed {{";
  if (ch === "-" && next === "}") return "whitespace control (-}})";
  if (ch === "|") return "a filter (|)";
  if (ch === "[") return "a subscript ([ ])";
  if (ch === "(") return "a call (( ))";
  if (/[0-9]/.test(ch)) return "a number or list index";
  if (ch === "'" || ch === '"') return "a string literal";
  if (ch === "}") return "an empty {{ }}";
  if (/[^\x00-\x7f]/.test(ch)) return "a name with characters outside [A-Za-z0-9_]";
  return "an expression";
}

/** Jinja's lexer on newlines: \r\n, \r and \n become \n, one final newline dropped. */
function jinjaNewlines(body: string): string {
  const lines = body.split(/\r\n|\r|\n/);
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  return lines.join("\n");
}

/** The template as text and variables; refuses anything that is not a plain variable. */
export function parseJinjaTemplate(body: string): TemplatePiece[] {
  const source = jinjaNewlines(body);
  const pieces: TemplatePiece[] = [];
  let at = 0;
  const blanks = (): void => {
    BLANKS.lastIndex = at;
    BLANKS.exec(source);
    at = BLANKS.lastIndex;
  };
  const name = (): string => {
    NAME.lastIndex = at;
    const m = NAME.exec(source);
    if (!m) throw bad(`${construct(source[at], source[at + 1])} is not supported (only {{ name.name }})`);
    at = NAME.lastIndex;
    return m[0];
  };
  for (;;) {
    const open = source.slice(at).search(/\{[{%#]/);
    if (open === -1) break;
    if (open > 0) pieces.push(source.slice(at, at + open));
    at += open;
    const kind = source[at + 1];
    if (kind === "%") throw bad("a statement ({% %}) is not supported (only {{ name.name }})");
    if (kind === "#") throw bad("a comment ({# #}) is not supported (only {{ name.name }})");
    at += 2;
    if (source[at] === "-" || source[at] === "+") throw bad("whitespace control ({{- }}) is not supported");
    blanks();
    const names = [name()];
    for (;;) {
      blanks();
      if (source.startsWith("}}", at)) break;
      if (source[at] !== ".")
        throw bad(`${construct(source[at], source[at + 1])} is not supported (only {{ name.name }})`);
      at++;
      blanks();
      names.push(name());
    }
    at += 2;
    pieces.push({ names });
  }
  if (at < source.length) pieces.push(source.slice(at));
  return pieces;
}

/** Python's sort order of str: by code point (not UTF-16 units). */
function byCodePoint(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = (x[i] as string).codePointAt(0) as number;
    const e = (y[i] as string).codePointAt(0) as number;
    if (d !== e) return d - e;
  }
  return x.length - y.length;
}

/** util.b64d: the decoded text when it is UTF-8, else the bytes. */
function b64d(value: PyValue): PyValue {
  if (typeof value !== "string") throw bad("instance data: a base64-encoded-keys value is not a string");
  if (/[^\x00-\x7f]/.test(value)) throw bad("instance data: a base64-encoded-keys value is not base64");
  const bytes = pyB64decode(new TextEncoder().encode(value));
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return bytes;
  }
}

/** convert_jinja_instance_data(include_key_aliases=True), on one map. */
function convert(
  data: ReadonlyMap<unknown, PyValue>,
  prefix: string,
  decodePaths: readonly string[],
): Map<string, PyValue> {
  const result = new Map<string, PyValue>();
  const keys = [...data.keys()].map(String).sort(byCodePoint);
  for (const key of keys) {
    let value = data.get(key) as PyValue;
    const keyPath = prefix ? `${prefix}/${key}` : key;
    if (decodePaths.includes(keyPath)) value = b64d(value);
    if (value instanceof Map) {
      const converted = convert(value, keyPath, decodePaths);
      result.set(key, converted);
      if (VERSION_KEY.test(key)) for (const [k, v] of converted) result.set(k, v);
    } else result.set(key, value);
    const alias = key.replace(OPERATORS, "_");
    if (alias !== key) result.set(alias, result.get(key) as PyValue);
  }
  return result;
}

/** The variables a template sees, from the instance data's top-level map. */
export function jinjaVariables(instanceData: ReadonlyMap<unknown, PyValue>): Map<string, PyValue> {
  const listed = instanceData.get("base64-encoded-keys") ?? [];
  if (!Array.isArray(listed) || !listed.every((p) => typeof p === "string")) {
    throw bad("instance data: base64-encoded-keys is not a list of strings");
  }
  return convert(
    instanceData,
    "",
    (listed as string[]).map((p) => p.replaceAll("-", "_")),
  );
}

/** The Python type name of a value, for the attribute rule and messages. */
function pyType(v: PyValue): string {
  if (v === null) return "NoneType";
  if (typeof v === "string") return "str";
  if (typeof v === "bigint" || typeof v === "boolean") return "int";
  if (typeof v === "number") return "float";
  if (Array.isArray(v)) return "list";
  if (v instanceof Map) return "dict";
  return "bytes";
}

const UNDEFINED: unique symbol = Symbol("undefined");

/** One variable's text, as Jinja with cloud-init's UndefinedJinjaVariable prints it. */
function renderVariable(
  variable: JinjaVariable,
  vars: ReadonlyMap<string, PyValue>,
  missing: string[],
): string {
  const [first, ...rest] = variable.names as [string, ...string[]];
  const shown = shownVariable(variable.names);
  if (JINJA_NAMES.has(first))
    throw bad(`${shown}: \`${first}\` is a Jinja keyword, literal or name of its own`);
  let value: PyValue | typeof UNDEFINED = vars.has(first) ? (vars.get(first) as PyValue) : UNDEFINED;
  if (value === UNDEFINED && JINJA_GLOBALS.has(first)) throw bad(`${shown}: \`${first}\` is a Jinja global`);
  let last = first;
  for (const name of rest) {
    if (value === UNDEFINED) {
      throw bad(`${shown}: \`${last}\` is undefined, so cloud-init 22.4 renders nothing of this user-data`);
    }
    const type = pyType(value);
    if (name.startsWith("__") || PY_ATTRS[type]?.has(name) || type === "bytes") {
      throw bad(`${shown}: \`.${name}\` is a Python attribute of a ${type}, not instance data`);
    }
    value = value instanceof Map ? (value.has(name) ? (value.get(name) as PyValue) : UNDEFINED) : UNDEFINED;
    last = name;
  }
  if (value === UNDEFINED) {
    missing.push(last);
    return `${MISSING_JINJA_PREFIX}${last}`;
  }
  const text = pyStr(value);
  if (text === null) {
    throw bad(`${shown} is a ${pyType(value)}: Python's repr of it is not rendered by bootseal`);
  }
  return text;
}

/** The rendered template (text only; cloud-init's trailing newline rule is the caller's). */
export function renderJinjaTemplate(
  pieces: readonly TemplatePiece[],
  vars: ReadonlyMap<string, PyValue>,
  warn: (line: string) => void,
): string {
  const missing: string[] = [];
  const out = pieces.map((p) => (typeof p === "string" ? p : renderVariable(p, vars, missing))).join("");
  if (missing.length > 0) {
    warn(
      `cloud-config: Jinja variables not in the instance data, rendered as ${MISSING_JINJA_PREFIX}<name> ` +
        `(as cloud-init does): ${missing.join(", ")}`,
    );
  }
  return out;
}

/** Python's json.loads for instance data: integers exact, `1.0` a float, objects as maps. */
function parseInstanceJson(text: string, file: string): PyValue {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text, function revive(this: unknown, _key, value, context?: { source?: string }) {
      if (typeof value === "number" && context?.source !== undefined && /^-?\d+$/.test(context.source)) {
        return BigInt(context.source);
      }
      if (value !== null && typeof value === "object" && !Array.isArray(value)) {
        return new Map(Object.entries(value as Record<string, PyValue>));
      }
      return value;
    });
  } catch {
    throw bad(`the instance data ${file} is not JSON`);
  }
  return parsed as PyValue;
}

/**
 * The instance data under `root`: the sensitive file cloud-init's part handler reads, else the
 * redacted one (`cloud-init devel render` as root falls back the same way).
 */
export async function loadInstanceData(root: string): Promise<ReadonlyMap<unknown, PyValue>> {
  for (const file of INSTANCE_DATA_FILES) {
    let bytes: Buffer;
    try {
      bytes = await readFile(join(root, file));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw new BootsealError("IO_ERROR", `cloud-config: cannot read the instance data ${file}`);
    }
    if (bytes.length > MAX_DOCUMENT_BYTES) throw new BootsealError("TOO_LARGE", `${file} is too large`);
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      throw bad(`the instance data ${file} is not UTF-8`);
    }
    const data = parseInstanceJson(text, file);
    if (!(data instanceof Map)) throw bad(`the instance data ${file} is not a JSON object`);
    return data;
  }
  throw bad(
    `its variables need cloud-init's instance data (${INSTANCE_DATA_FILES.join(" or ")} under --root); none found`,
  );
}

/**
 * The user-data cloud-init 22.4 hands to its cloud-config module: a `## template: jinja`
 * payload rendered (instance data read only when the template has variables), any other
 * payload as it is.
 */
export async function renderJinjaUserData(
  payload: Uint8Array,
  root: string,
  warn: (line: string) => void,
): Promise<Uint8Array> {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(payload);
  } catch {
    return payload; // the cloud-config parser refuses it
  }
  const body = jinjaTemplateBody(text);
  if (body === null) return payload;
  const pieces = parseJinjaTemplate(body);
  const vars = pieces.some((p) => typeof p !== "string")
    ? jinjaVariables(await loadInstanceData(root))
    : new Map<string, PyValue>();
  // jinja_render: Jinja drops the final newline, cloud-init adds one back when there was one.
  const rendered = renderJinjaTemplate(pieces, vars, warn) + (body.endsWith("\n") ? "\n" : "");
  if (!isCloudConfigStart(rendered)) {
    throw bad("the rendered text is not a #cloud-config (cloud-init 22.4 would ignore it)");
  }
  return new TextEncoder().encode(rendered);
}
