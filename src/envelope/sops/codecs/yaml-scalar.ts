/**
 * Scalar typing and scalar text for the YAML codec, matching go-yaml v3 (the library sops
 * uses): how a plain scalar resolves (resolve.go), how Go formats floats and timestamps, and
 * which strings go-yaml must quote on output (encode.go stringv + emitterc.go analysis).
 * A YAML 1.2 core-schema library disagrees on octal `017`, underscores, `yes`/`no` quoting and
 * timestamps, and any mismatch changes the MAC sops recomputes (docs/sops-format.md section 7.1).
 */
import { BootsealError } from "../../../errors.ts";
import type { Scalar } from "../document.ts";

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

const NULLS = new Set(["", "~", "null", "Null", "NULL"]);
const TRUES = new Set(["true", "True", "TRUE"]);
const FALSES = new Set(["false", "False", "FALSE"]);
const SPECIAL_FLOATS = new Map<string, number>([
  [".nan", Number.NaN],
  [".NaN", Number.NaN],
  [".NAN", Number.NaN],
  [".inf", Number.POSITIVE_INFINITY],
  [".Inf", Number.POSITIVE_INFINITY],
  [".INF", Number.POSITIVE_INFINITY],
  ["+.inf", Number.POSITIVE_INFINITY],
  ["+.Inf", Number.POSITIVE_INFINITY],
  ["+.INF", Number.POSITIVE_INFINITY],
  ["-.inf", Number.NEGATIVE_INFINITY],
  ["-.Inf", Number.NEGATIVE_INFINITY],
  ["-.INF", Number.NEGATIVE_INFINITY],
]);

/** What go-yaml's resolve() makes of an untagged plain scalar. `uint` is out of sops' range. */
export type Resolved = Scalar | { readonly kind: "scalar"; readonly type: "uint"; readonly value: bigint };

/** go-yaml's yamlStyleFloat, applied after underscores are removed. */
const YAML_STYLE_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
/** Go ParseFloat syntax for text starting with "." (underscores only between digits). */
const DOT_FLOAT = /^\.[0-9](_?[0-9])*([eE][-+]?[0-9](_?[0-9])*)?$/;

/** Go strconv.ParseInt/ParseUint with base 0 (sign, 0x/0o/0b, leading-0 octal). */
function parseGoInt(text: string): bigint | undefined {
  let s = text;
  let negative = false;
  if (s.startsWith("+") || s.startsWith("-")) {
    negative = s[0] === "-";
    s = s.slice(1);
  }
  let digits: RegExp;
  let prefix = "";
  if (/^0[xX]/.test(s)) {
    digits = /^[0-9a-fA-F]+$/;
    prefix = "0x";
    s = s.slice(2);
  } else if (/^0[oO]/.test(s)) {
    digits = /^[0-7]+$/;
    prefix = "0o";
    s = s.slice(2);
  } else if (/^0[bB]/.test(s)) {
    digits = /^[01]+$/;
    prefix = "0b";
    s = s.slice(2);
  } else if (s.length > 1 && s.startsWith("0")) {
    digits = /^[0-7]+$/;
    prefix = "0o";
    s = s.slice(1);
  } else {
    digits = /^[0-9]+$/;
  }
  if (!digits.test(s)) return undefined;
  const magnitude = BigInt(prefix + s);
  return negative ? -magnitude : magnitude;
}

/** Go ParseFloat on syntax already checked: overflow is an error there, so undefined here. */
function parseGoFloat(text: string): number | undefined {
  const value = Number(text.replaceAll("_", ""));
  return Number.isFinite(value) ? value : undefined;
}

function goInt(value: bigint): Resolved | undefined {
  if (value >= INT64_MIN && value <= INT64_MAX) return { kind: "scalar", type: "int", value };
  if (value > INT64_MAX && value <= UINT64_MAX) return { kind: "scalar", type: "uint", value };
  return undefined;
}

/** Resolve an untagged plain scalar exactly as go-yaml v3 does (resolve.go). */
export function resolvePlain(text: string): Resolved {
  if (NULLS.has(text)) return { kind: "scalar", type: "null" };
  if (TRUES.has(text)) return { kind: "scalar", type: "bool", value: true };
  if (FALSES.has(text)) return { kind: "scalar", type: "bool", value: false };
  const special = SPECIAL_FLOATS.get(text);
  if (special !== undefined) return { kind: "scalar", type: "float", value: special };
  const first = text[0] ?? "";
  if (first === ".") {
    if (DOT_FLOAT.test(text)) {
      const value = parseGoFloat(text);
      if (value !== undefined) return { kind: "scalar", type: "float", value };
    }
  } else if (/^[-+0-9]$/.test(first)) {
    const time = parseGoTimestamp(text);
    if (time !== undefined) return { kind: "scalar", type: "time", value: time };
    const plain = text.replaceAll("_", "");
    const int = parseGoInt(plain);
    const asInt = int === undefined ? undefined : goInt(int);
    if (asInt) return asInt;
    if (YAML_STYLE_FLOAT.test(plain)) {
      const value = parseGoFloat(plain);
      if (value !== undefined) return { kind: "scalar", type: "float", value };
    }
  }
  return { kind: "scalar", type: "str", value: text };
}

/** True when go-yaml would read `text`, written plain, as a string. */
export function resolvesToString(text: string): boolean {
  if (text === "<<") return false; // the merge key resolves to !!merge
  return resolvePlain(text).type === "str";
}

/** Resolve a scalar carrying an explicit tag (!!str, !!int, …); lineNo is for errors only. */
export function resolveTagged(text: string, tag: string, lineNo: number): Scalar {
  const bad = (): never => {
    throw new BootsealError("BAD_INPUT", `yaml: line ${lineNo}: value does not match its tag ${tag}`);
  };
  switch (tag) {
    case "!!str":
      return { kind: "scalar", type: "str", value: text };
    case "!!binary": {
      const bytes = Buffer.from(text.replace(/\s+/g, ""), "base64");
      return { kind: "scalar", type: "str", value: utf8OrBytes(new Uint8Array(bytes)) };
    }
    case "!!timestamp": {
      const time = parseGoTimestamp(text);
      return time === undefined ? bad() : { kind: "scalar", type: "time", value: time };
    }
  }
  const resolved = resolvePlain(text);
  if (resolved.type === "uint") return bad();
  const wanted: Record<string, string> = {
    "!!int": "int",
    "!!float": "float",
    "!!bool": "bool",
    "!!null": "null",
  };
  const want = wanted[tag];
  if (want === undefined) return { kind: "scalar", type: "str", value: text }; // local tags decode as text
  if (resolved.type === want) return resolved;
  if (want === "float" && resolved.type === "int")
    return { kind: "scalar", type: "float", value: Number(resolved.value) };
  return bad();
}

function utf8OrBytes(bytes: Uint8Array): string | Uint8Array {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return bytes;
  }
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isLeap(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

const pad = (n: number, width: number): string => String(n).padStart(width, "0");

/**
 * go-yaml's parseTimestamp: Go time.Parse with the layouts "2006-1-2T15:4:5.999999999Z07:00"
 * (also lower-case t), "2006-1-2 15:4:5.999999999" (UTC; Go lets one layout space match a run
 * of spaces) and "2006-1-2". Returns Go's
 * MarshalText form (RFC 3339, fraction without trailing zeros, Z for a zero offset).
 */
export function parseGoTimestamp(text: string): string | undefined {
  const m =
    /^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:(?:([Tt])|( +))([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:[.,]([0-9]+))?(Z|[+-][0-9]{2}:[0-9]{2})?)?$/.exec(
      text,
    );
  if (!m) return undefined;
  const [, y, mo, d, t, space, h, mi, s, frac, zone] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  if (month < 1 || month > 12) return undefined;
  const dim = month === 2 && isLeap(year) ? 29 : (DAYS_IN_MONTH[month - 1] ?? 0);
  if (day < 1 || day > dim) return undefined;
  const date = `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}`;
  if (h === undefined) return `${date}T00:00:00Z`;
  // The T layouts require a zone; the space layout forbids one.
  if (t !== undefined && zone === undefined) return undefined;
  if (space !== undefined && zone !== undefined) return undefined;
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  let offset = 0;
  if (zone !== undefined && zone !== "Z") {
    const zh = Number(zone.slice(1, 3));
    const zm = Number(zone.slice(4, 6));
    if (zh > 24 || zm > 60) return undefined;
    offset = (zh * 60 + zm) * (zone[0] === "-" ? -1 : 1);
  }
  // Go keeps nanoseconds: digits beyond the ninth are dropped, trailing zeros are not printed.
  const nanos = (frac ?? "").slice(0, 9).replace(/0+$/, "");
  const fraction = nanos ? `.${nanos}` : "";
  let suffix = "Z";
  if (offset !== 0) {
    const abs = Math.abs(offset);
    suffix = `${offset < 0 ? "-" : "+"}${pad(Math.floor(abs / 60), 2)}:${pad(abs % 60, 2)}`;
  }
  return `${date}T${pad(hour, 2)}:${pad(minute, 2)}:${pad(second, 2)}${fraction}${suffix}`;
}

/** Go strconv.FormatFloat(v, 'g', -1, 64), as go-yaml's encoder writes floats (.inf/.nan aside). */
export function formatGoFloat(value: number): string {
  if (Number.isNaN(value)) return ".nan";
  if (value === Number.POSITIVE_INFINITY) return ".inf";
  if (value === Number.NEGATIVE_INFINITY) return "-.inf";
  if (value === 0) return Object.is(value, -0) ? "-0" : "0";
  const [mantissa = "", expText = "0"] = Math.abs(value).toExponential().split("e");
  const digits = mantissa.replace(".", "");
  const exp = Number(expText);
  const sign = value < 0 ? "-" : "";
  // Shortest formatting switches to %e when the exponent is < -4 or >= 6 (strconv ftoa.go).
  if (exp < -4 || exp >= 6) {
    const frac = digits.length > 1 ? `.${digits.slice(1)}` : "";
    const e = Math.abs(exp);
    return `${sign}${digits[0]}${frac}e${exp < 0 ? "-" : "+"}${e < 10 ? "0" : ""}${e}`;
  }
  const point = exp + 1;
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** YAML 1.1 base-60 floats: go-yaml quotes them on output for older parsers. */
const BASE60_FLOAT = /^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$/;
const OLD_BOOLS = new Set([
  "y",
  "Y",
  "yes",
  "Yes",
  "YES",
  "on",
  "On",
  "ON",
  "n",
  "N",
  "no",
  "No",
  "NO",
  "off",
  "Off",
  "OFF",
]);

/** go-yaml encoder's test: may this string be written without quotes, as far as typing goes? */
export function canUsePlain(text: string): boolean {
  const base60 = /^[-+0-9]/.test(text) && text.includes(":") && BASE60_FLOAT.test(text);
  return resolvesToString(text) && !base60 && !OLD_BOOLS.has(text);
}

export type ScalarStyle = "plain" | "single" | "double" | "literal";

/** What go-yaml's emitter found out about a string (yaml_emitter_analyze_scalar). */
export interface Analysis {
  multiline: boolean;
  flowPlain: boolean;
  blockPlain: boolean;
  single: boolean;
  block: boolean;
}

export const isBreak = (c: string | undefined): boolean =>
  c === "\n" || c === "\r" || c === "\u0085" || c === "\u2028" || c === "\u2029";
export const isBlank = (c: string | undefined): boolean => c === " " || c === "\t";

/** go-yaml's is_printable, restated per code point (it tests UTF-8 bytes: 4-byte chars fail). */
export function isPrintable(c: string): boolean {
  const cp = c.codePointAt(0) ?? 0;
  return (
    cp === 0x0a ||
    (cp >= 0x20 && cp <= 0x7e) ||
    (cp >= 0xa0 && cp <= 0xd7ff) ||
    (cp >= 0xe000 && cp <= 0xfffd && cp !== 0xfeff)
  );
}

/** Only printable ASCII (0x20-0x7e): no breaks, tabs, specials or multi-unit characters. */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/** First-character indicators (go-yaml analyze_scalar), by char code. */
const FIRST_INDICATORS = new Set(Array.from("#,[]{}&*!|>'\"%@`", (c) => c.charCodeAt(0)));
/** Flow indicators after the first character. */
const FLOW_AFTER_FIRST = /[,?[\]{}:]/g;

/**
 * analyzeScalar for printable ASCII: the same decisions as the general loop, stated as
 * searches (native string scans instead of a loop per character). Past the first character,
 * `,?[]{}:` are flow indicators, `: `, a final `:` and ` #` are block (and flow) indicators;
 * breaks, tabs and special characters cannot occur.
 */
function analyzeAscii(value: string): Analysis {
  const n = value.length;
  let blockIndicators = value.startsWith("---") || value.startsWith("...");
  let flowIndicators = blockIndicators;
  const c0 = value.charCodeAt(0);
  const followedByWhitespace = n === 1 || value.charCodeAt(1) === 0x20;
  if (FIRST_INDICATORS.has(c0)) {
    flowIndicators = true;
    blockIndicators = true;
  } else if (c0 === 0x3f /* ? */ || c0 === 0x3a /* : */) {
    flowIndicators = true;
    if (followedByWhitespace) blockIndicators = true;
  } else if (c0 === 0x2d /* - */ && followedByWhitespace) {
    flowIndicators = true;
    blockIndicators = true;
  }
  if (!blockIndicators) {
    blockIndicators =
      value.indexOf(": ", 1) !== -1 || (n > 1 && value.endsWith(":")) || value.indexOf(" #") !== -1;
    if (blockIndicators) flowIndicators = true;
  }
  if (!flowIndicators) {
    FLOW_AFTER_FIRST.lastIndex = 1;
    flowIndicators = FLOW_AFTER_FIRST.test(value);
  }
  const leadingSpace = c0 === 0x20;
  const trailingSpace = value.charCodeAt(n - 1) === 0x20;
  const a: Analysis = { multiline: false, flowPlain: true, blockPlain: true, single: true, block: true };
  if (leadingSpace || trailingSpace) a.flowPlain = a.blockPlain = false;
  if (trailingSpace) a.block = false;
  if (flowIndicators) a.flowPlain = false;
  if (blockIndicators) a.blockPlain = false;
  return a;
}

/** yaml_emitter_analyze_scalar: which styles can hold this text. */
export function analyzeScalar(value: string): Analysis {
  if (value === "")
    return { multiline: false, flowPlain: false, blockPlain: true, single: true, block: false };
  if (PRINTABLE_ASCII.test(value)) return analyzeAscii(value);
  const chars = Array.from(value);
  let blockIndicators = value.startsWith("---") || value.startsWith("...");
  let flowIndicators = blockIndicators;
  let lineBreaks = false;
  let special = false;
  let tabs = false;
  let leadingSpace = false;
  let leadingBreak = false;
  let trailingSpace = false;
  let trailingBreak = false;
  let breakSpace = false;
  let spaceBreak = false;
  let precededByWhitespace = true;
  let previousSpace = false;
  let previousBreak = false;
  chars.forEach((c, i) => {
    const next = chars[i + 1];
    const followedByWhitespace = next === undefined || isBlank(next);
    if (i === 0) {
      if ("#,[]{}&*!|>'\"%@`".includes(c)) {
        flowIndicators = true;
        blockIndicators = true;
      } else if (c === "?" || c === ":") {
        flowIndicators = true;
        if (followedByWhitespace) blockIndicators = true;
      } else if (c === "-" && followedByWhitespace) {
        flowIndicators = true;
        blockIndicators = true;
      }
    } else if (",?[]{}".includes(c)) {
      flowIndicators = true;
    } else if (c === ":") {
      flowIndicators = true;
      if (followedByWhitespace) blockIndicators = true;
    } else if (c === "#" && precededByWhitespace) {
      flowIndicators = true;
      blockIndicators = true;
    }
    if (c === "\t") tabs = true;
    else if (!isPrintable(c)) special = true;
    const last = i === chars.length - 1;
    if (c === " ") {
      if (i === 0) leadingSpace = true;
      if (last) trailingSpace = true;
      if (previousBreak) breakSpace = true;
      previousSpace = true;
      previousBreak = false;
    } else if (isBreak(c)) {
      lineBreaks = true;
      if (i === 0) leadingBreak = true;
      if (last) trailingBreak = true;
      if (previousSpace) spaceBreak = true;
      previousSpace = false;
      previousBreak = true;
    } else {
      previousSpace = false;
      previousBreak = false;
    }
    precededByWhitespace = isBlank(c) || isBreak(c) || c === "\0";
  });
  const a: Analysis = { multiline: lineBreaks, flowPlain: true, blockPlain: true, single: true, block: true };
  if (leadingSpace || leadingBreak || trailingSpace || trailingBreak) a.flowPlain = a.blockPlain = false;
  if (trailingSpace) a.block = false;
  if (breakSpace) a.flowPlain = a.blockPlain = a.single = false;
  if (spaceBreak || tabs || special) a.flowPlain = a.blockPlain = a.single = false;
  if (spaceBreak || special) a.block = false;
  if (lineBreaks) a.flowPlain = a.blockPlain = false;
  if (flowIndicators) a.flowPlain = false;
  if (blockIndicators) a.blockPlain = false;
  return a;
}

/** The style go-yaml settles on for a block-context, non-key scalar of the requested style. */
export function settleStyle(requested: ScalarStyle, a: Analysis): ScalarStyle {
  let style = requested;
  if (style === "plain" && !a.blockPlain) style = "single";
  if (style === "single" && !a.single) style = "double";
  if (style === "literal" && !a.block) style = "double";
  return style;
}
