/**
 * Canonical plaintext bytes of a scalar, and back (docs/sops-format.md section 2.2).
 *
 * These bytes are both what gets encrypted and what gets hashed into the MAC, so they must
 * be exactly the Go forms sops produces (strconv.Itoa, FormatFloat(v,'f',-1,64), "True"/
 * "False", time.MarshalText); otherwise sops recomputes a different MAC.
 */
import { BootsealError } from "../../errors.ts";
import type { Scalar } from "./document.ts";

const utf8Encoder = new TextEncoder();
// fatal: non-UTF-8 plaintext stays bytes; ignoreBOM: a leading BOM is part of the value.
const utf8Decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** The bytes sops encrypts and hashes for a scalar; null for null (skipped by sops). */
export function plaintextBytes(s: Scalar): Uint8Array | null {
  switch (s.type) {
    case "null":
      return null;
    case "str":
      return typeof s.value === "string" ? utf8Encoder.encode(s.value) : s.value;
    case "bytes":
      return s.value;
    case "int":
      return utf8Encoder.encode(s.value.toString(10));
    case "float":
      return utf8Encoder.encode(formatGoFloat(s.value));
    case "bool":
      // Title case, inherited from the Python sops.
      return utf8Encoder.encode(s.value ? "True" : "False");
    case "time":
      // Held in MarshalText form already (document.ts).
      return utf8Encoder.encode(s.value);
  }
}

/** Parse decrypted bytes back into a scalar of the recorded `type:`, as sops's cipher does. */
export function scalarFromPlaintext(type: string, bytes: Uint8Array): Scalar {
  switch (type) {
    case "str":
      return { kind: "scalar", type: "str", value: decodeUtf8OrBytes(bytes) };
    case "bytes":
      return { kind: "scalar", type: "bytes", value: bytes };
    case "int":
      return { kind: "scalar", type: "int", value: parseGoInt(latin(bytes)) };
    case "float":
      return { kind: "scalar", type: "float", value: parseGoFloat(latin(bytes)) };
    case "bool":
      return { kind: "scalar", type: "bool", value: parseGoBool(latin(bytes)) };
    case "time": {
      const t = parseRfc3339(latin(bytes));
      if (t === null) throw new BootsealError("BAD_INPUT", "Invalid time value");
      return { kind: "scalar", type: "time", value: formatTimeText(t) };
    }
    default:
      throw new BootsealError("BAD_INPUT", "Unknown datatype");
  }
}

/** UTF-8 text when valid, otherwise the raw bytes (binary store). */
export function decodeUtf8OrBytes(bytes: Uint8Array): string | Uint8Array {
  try {
    return utf8Decoder.decode(bytes);
  } catch {
    return bytes;
  }
}

// Numeric/bool/time grammars are ASCII; any other byte simply fails to match.
function latin(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => String.fromCharCode(b)).join("");
}

/** Go strconv.Atoi on a 64-bit platform: optional sign, decimal digits, int64 range. */
export function parseGoInt(text: string): bigint {
  if (!/^[+-]?[0-9]+$/.test(text)) throw new BootsealError("BAD_INPUT", "Invalid int value");
  const v = BigInt(text);
  if (v < INT64_MIN || v > INT64_MAX) throw new BootsealError("BAD_INPUT", "Int value out of range");
  return v;
}

/** Go strconv.ParseBool. */
export function parseGoBool(text: string): boolean {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(text)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(text)) return false;
  throw new BootsealError("BAD_INPUT", "Invalid bool value");
}

/**
 * Go strconv.ParseFloat(s, 64) for decimal input and the inf/nan spellings. Hexadecimal
 * floats and underscores (never written by sops) are refused rather than half-supported.
 */
export function parseGoFloat(text: string): number {
  const special = /^([+-]?)(inf|infinity)$/i.exec(text);
  if (special) return special[1] === "-" ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY;
  if (/^nan$/i.test(text)) return Number.NaN;
  if (!/^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/.test(text)) {
    throw new BootsealError("BAD_INPUT", "Invalid float value");
  }
  const v = Number(text);
  // Go reports overflow (ErrRange) instead of returning an infinity.
  if (!Number.isFinite(v)) throw new BootsealError("BAD_INPUT", "Float value out of range");
  return v;
}

/**
 * Go strconv.FormatFloat(v, 'f', -1, 64): the shortest digits that round-trip (JavaScript's
 * Number-to-string picks the same digits), laid out without an exponent.
 */
export function formatGoFloat(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  if (v === 0) return Object.is(v, -0) ? "-0" : "0";
  const sign = v < 0 ? "-" : "";
  const js = String(Math.abs(v));
  const eAt = js.indexOf("e");
  const mantissa = eAt === -1 ? js : js.slice(0, eAt);
  const exponent = eAt === -1 ? 0 : Number(js.slice(eAt + 1));
  const dot = mantissa.indexOf(".");
  const intDigits = dot === -1 ? mantissa.length : dot;
  let digits = mantissa.replace(".", "");
  // Position of the decimal point within `digits` once the exponent is applied.
  let point = intDigits + exponent;
  const lead = /^0*/.exec(digits)?.[0].length ?? 0;
  digits = digits.slice(lead);
  point -= lead;
  let out: string;
  if (point <= 0) out = "0." + "0".repeat(-point) + digits;
  else if (point >= digits.length) out = digits + "0".repeat(point - digits.length);
  else out = digits.slice(0, point) + "." + digits.slice(point);
  return sign + out;
}

/** An RFC 3339 instant as Go holds it: wall-clock fields, nanoseconds, and the zone offset. */
export interface Rfc3339Time {
  readonly year: number;
  readonly month: number;
  readonly day: number;
  readonly hour: number;
  readonly minute: number;
  readonly second: number;
  /** Up to 9 fraction digits, as written (Go keeps nanoseconds). */
  readonly nanos: number;
  /** Offset from UTC in minutes; 0 is written as `Z`. */
  readonly offsetMinutes: number;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:(Z)|([+-])(\d{2}):(\d{2}))$/;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** Go's RFC 3339 parse (time.Parse(time.RFC3339, s) / UnmarshalText); null when invalid. */
export function parseRfc3339(text: string): Rfc3339Time | null {
  const m = RFC3339.exec(text);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i]));
  if (
    year === undefined ||
    month === undefined ||
    day === undefined ||
    hour === undefined ||
    minute === undefined ||
    second === undefined
  ) {
    return null;
  }
  if (month < 1 || month > 12 || day < 1 || day > leapAwareDays(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 59) return null;
  // Go keeps at most nanosecond precision and truncates further digits.
  const nanos = m[7] === undefined ? 0 : Number((m[7] + "00000000").slice(0, 9));
  let offsetMinutes = 0;
  if (m[8] === undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return null;
    offsetMinutes = (m[9] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  return { year, month, day, hour, minute, second, nanos, offsetMinutes };
}

function leapAwareDays(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return DAYS_IN_MONTH[month - 1] ?? 0;
}

const pad = (n: number, width: number): string => String(n).padStart(width, "0");

function formatOffset(offsetMinutes: number): string {
  if (offsetMinutes === 0) return "Z";
  const abs = Math.abs(offsetMinutes);
  return (offsetMinutes < 0 ? "-" : "+") + pad(Math.floor(abs / 60), 2) + ":" + pad(abs % 60, 2);
}

/** Go time.Format(time.RFC3339): second precision, `Z` or ±hh:mm. */
export function formatRfc3339Seconds(t: Rfc3339Time): string {
  return (
    `${pad(t.year, 4)}-${pad(t.month, 2)}-${pad(t.day, 2)}T` +
    `${pad(t.hour, 2)}:${pad(t.minute, 2)}:${pad(t.second, 2)}${formatOffset(t.offsetMinutes)}`
  );
}

/** Go time.MarshalText: RFC 3339 with nanoseconds, trailing zeros of the fraction dropped. */
export function formatTimeText(t: Rfc3339Time): string {
  const base = `${pad(t.year, 4)}-${pad(t.month, 2)}-${pad(t.day, 2)}T${pad(t.hour, 2)}:${pad(t.minute, 2)}:${pad(t.second, 2)}`;
  const fraction = t.nanos === 0 ? "" : "." + pad(t.nanos, 9).replace(/0+$/, "");
  return base + fraction + formatOffset(t.offsetMinutes);
}
