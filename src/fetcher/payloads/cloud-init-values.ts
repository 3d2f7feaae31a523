/**
 * cloud-init's reading of a cloud-config, value by value, so files come out as cloud-init
 * 22.4.2 writes them. cloud-init is Python reading YAML 1.1 with PyYAML's safe loader: a bare
 * `0640` is octal, `yes` is true, later duplicate keys win; its helpers then apply Python's
 * rules (`int(str(x), 8)`, truthiness, `str()` of a list element, base64's lenient decoder).
 * Each function here is one of those rules (cloudinit/config/cc_write_files.py, util.py).
 *
 * A YAML document becomes PyValue: integers are bigint (exact, as Python's), floats number,
 * maps a Map keyed by the key's value (PyYAML's dict), `!!binary` a Uint8Array.
 */
import { gunzipSync } from "node:zlib";
import { type Document, isAlias, isMap, isScalar, isSeq, type Node } from "yaml";
import { BootsealError } from "../../errors.ts";
import { MAX_ALIAS_EXPANSION_NODES, MAX_DOCUMENT_BYTES } from "../../limits.ts";

export type PyValue =
  | string
  | bigint
  | number
  | boolean
  | null
  | Uint8Array
  | Date
  | readonly PyValue[]
  | ReadonlyMap<unknown, PyValue>;

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `cloud-config: ${message}`);
}

/** The document as Python sees it; aliases expanded, at most MAX_ALIAS_EXPANSION_NODES nodes. */
export function toPy(doc: Document): PyValue {
  let nodes = 0;
  const walk = (node: unknown): PyValue => {
    if (++nodes > MAX_ALIAS_EXPANSION_NODES)
      throw bad(`more than ${MAX_ALIAS_EXPANSION_NODES} nodes (aliases expanded)`);
    if (node === null || node === undefined) return null;
    if (isAlias(node)) return walk(node.resolve(doc));
    if (isScalar(node)) return node.value as PyValue;
    if (isSeq(node)) return node.items.map(walk);
    if (isMap(node)) {
      const out = new Map<unknown, PyValue>();
      for (const pair of node.items) {
        const key = walk(pair.key);
        if (key !== null && typeof key === "object") throw bad("a mapping key that is not a scalar");
        out.set(key, walk(pair.value as Node | null));
      }
      return out;
    }
    throw bad("an unsupported YAML node");
  };
  return walk(doc.contents);
}

export function isPyMap(v: PyValue): v is ReadonlyMap<unknown, PyValue> {
  return v instanceof Map;
}

/** Python's truthiness. */
export function truthy(v: PyValue): boolean {
  if (v === null || v === false || v === "" || v === 0n || v === 0) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Map || v instanceof Uint8Array) return (v instanceof Map ? v.size : v.length) > 0;
  return true;
}

/** repr() of a float, as str() gives it: shortest round trip, exponent outside [1e-4, 1e16). */
export function pyFloat(n: number): string {
  if (Number.isNaN(n)) return "nan";
  if (!Number.isFinite(n)) return n > 0 ? "inf" : "-inf";
  if (n === 0) return Object.is(n, -0) ? "-0.0" : "0.0";
  const [mantissa, exp] = n.toExponential().split("e") as [string, string];
  const e = Number(exp);
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  const sign = negative ? "-" : "";
  if (e < -4 || e >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${m}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  if (e < 0) return `${sign}0.${"0".repeat(-e - 1)}${digits}`;
  const int = digits.slice(0, e + 1).padEnd(e + 1, "0");
  const frac = digits.slice(e + 1);
  return `${sign}${int}.${frac === "" ? "0" : frac}`;
}

/** str() of a scalar; null for what cloud-init would print as a Python container or bytes. */
export function pyStr(v: PyValue): string | null {
  if (typeof v === "string") return v;
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "number") return pyFloat(v);
  if (typeof v === "boolean") return v ? "True" : "False";
  if (v === null) return "None";
  return null;
}

const TRUE_STRINGS = new Set(["true", "1", "on", "yes"]);

/** util.translate_bool: falsy is false, a bool is itself, else str(v).lower().strip(). */
export function translateBool(v: PyValue | undefined): boolean {
  if (v === undefined || !truthy(v)) return false;
  if (typeof v === "boolean") return v;
  return TRUE_STRINGS.has((pyStr(v) ?? "").toLowerCase().trim());
}

/** Python's `int(text, 8)`: white space, a sign, an optional 0o, digits with single underscores. */
function pyInt8(text: string): number | null {
  const m = /^([+-])?(?:0[oO]_?)?([0-7](?:_?[0-7])*)$/.exec(text.trim());
  if (!m) return null;
  const n = Number.parseInt((m[2] as string).replaceAll("_", ""), 8);
  return m[1] === "-" ? -n : n;
}

/** The C int os.chmod takes: outside it Python raises OverflowError. */
const INT_MIN = -(2 ** 31);
const INT_MAX = 2 ** 31 - 1;

/**
 * decode_perms: null is the default; an int (or bool) as is; a float truncated; anything else
 * as `int(str(x), 8)`, falling back to the default with a warning. The mode chmod(2) then
 * applies is the low 12 bits (two's complement for a negative one).
 */
export function decodePerms(
  perm: PyValue | undefined,
  fallback: number,
  warn: (line: string) => void,
): number {
  let n: number | null;
  if (perm === undefined || perm === null) return fallback;
  if (typeof perm === "boolean") n = perm ? 1 : 0;
  else if (typeof perm === "bigint")
    n = perm < BigInt(INT_MIN) || perm > BigInt(INT_MAX) ? Number.NaN : Number(perm);
  else if (typeof perm === "number") {
    if (Number.isNaN(perm)) n = null;
    else n = Number.isFinite(perm) ? Math.trunc(perm) : Number.POSITIVE_INFINITY;
  } else n = typeof perm === "string" ? pyInt8(perm) : null;
  if (n === null) {
    warn(`undecodable permissions, using the default ${fallback.toString(8).padStart(4, "0")}`);
    return fallback;
  }
  if (!(n >= INT_MIN && n <= INT_MAX)) throw bad("permissions too large for chmod");
  return (n >>> 0) & 0o7777;
}

export type Extraction = "base64" | "gzip";

/** canonicalize_extraction: the decoding steps an `encoding` names; unknown ones are text. */
export function extractions(encoding: PyValue | undefined, warn: (line: string) => void): Extraction[] {
  if (encoding === undefined || !truthy(encoding)) return [];
  if (typeof encoding !== "string") throw bad("encoding must be a string");
  const e = encoding.toLowerCase().trim();
  if (e === "gz" || e === "gzip") return ["gzip"];
  if (["gz+base64", "gzip+base64", "gz+b64", "gzip+b64"].includes(e)) return ["base64", "gzip"];
  if (e === "b64" || e === "base64") return ["base64"];
  if (e !== "text/plain" && e !== "") {
    warn(`unknown encoding ${JSON.stringify(e.slice(0, 40))}, assuming text/plain (as cloud-init does)`);
  }
  return [];
}

const B64 = new Map<number, number>(
  [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].map((c, i) => [c.charCodeAt(0), i]),
);

/**
 * base64.b64decode(data) with validate=False (binascii's lenient decoder): bytes outside the
 * alphabet are skipped, a pad ends the data once the group is complete, an unfinished group
 * is an error.
 */
export function pyB64decode(input: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.floor((input.length * 3) / 4) + 3);
  let o = 0;
  let quad = 0;
  let pads = 0;
  let left = 0;
  let count = 0;
  for (const byte of input) {
    if (byte === 0x3d) {
      if (quad >= 2 && quad + ++pads >= 4) return out.slice(0, o);
      continue;
    }
    const v = B64.get(byte);
    if (v === undefined) continue;
    count++;
    pads = 0;
    if (quad === 0) {
      left = v;
      quad = 1;
    } else if (quad === 1) {
      out[o++] = ((left << 2) | (v >> 4)) & 0xff;
      left = v & 0x0f;
      quad = 2;
    } else if (quad === 2) {
      out[o++] = ((left << 4) | (v >> 2)) & 0xff;
      left = v & 0x03;
      quad = 3;
    } else {
      out[o++] = ((left << 6) | v) & 0xff;
      quad = 0;
    }
  }
  if (quad === 1) throw bad(`content is not base64: ${count} data characters, 1 more than a multiple of 4`);
  if (quad !== 0) throw bad("content is not base64: incorrect padding");
  return out.slice(0, o);
}

/** util.decomp_gzip(quiet=False): all members; empty input is empty. */
function gunzip(data: Uint8Array): Uint8Array {
  if (data.length === 0) return data;
  try {
    return new Uint8Array(gunzipSync(data, { maxOutputLength: MAX_DOCUMENT_BYTES }));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ERR_BUFFER_TOO_LARGE")
      throw new BootsealError("TOO_LARGE", "cloud-config: gzip content larger than the document cap");
    throw bad(`content is not gzip data (${code ?? "error"})`);
  }
}

/** extract_contents and write_file's encode_text: the bytes a write_files entry writes. */
export function extractContents(content: PyValue, steps: readonly Extraction[]): Uint8Array {
  let data: Uint8Array;
  if (content instanceof Uint8Array) data = content;
  else if (typeof content === "string") {
    // b64decode refuses a str that is not ASCII; encode_text is UTF-8.
    if (steps[0] === "base64" && /[^\x00-\x7f]/.test(content)) {
      throw bad("content is not base64: non-ASCII characters");
    }
    data = new TextEncoder().encode(content);
  } else throw bad("content must be a string or !!binary");
  for (const step of steps) data = step === "base64" ? pyB64decode(data) : gunzip(data);
  return data;
}

/** util.extract_usergroup: "user:group"; empty, "-1" and "none" parts mean unchanged. */
export function extractUserGroup(pair: PyValue): { user: string | null; group: string | null } {
  if (!truthy(pair)) return { user: null, group: null };
  if (typeof pair !== "string") throw bad("owner must be a string such as root:root");
  const at = pair.indexOf(":");
  const u = (at === -1 ? pair : pair.slice(0, at)).trim();
  const g = at === -1 ? "" : pair.slice(at + 1).trim();
  const keep = (s: string): string | null =>
    s === "" || s === "-1" || s.toLowerCase() === "none" ? null : s;
  return { user: keep(u), group: keep(g) };
}
