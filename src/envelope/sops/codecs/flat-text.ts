/**
 * Text handling shared by the flat codecs (dotenv, INI).
 *
 * sops works on Go strings, which are bytes: it splits, trims and pads by byte, and a value
 * need not be UTF-8. To stay byte-exact, the flat codecs parse and emit "byte strings": JS
 * strings whose char codes are the file's bytes (0-255). Conversion to real text happens
 * only at the tree boundary. Every operation on a byte string must therefore be ASCII-only
 * or byte-aware; JS `trim()` is not (it would eat byte 0xA0, part of many UTF-8 letters).
 */
import type { Scalar } from "../document.ts";

const utf8Encoder = new TextEncoder();
// fatal: a value that is not UTF-8 stays bytes; ignoreBOM: a BOM inside text is content.
const utf8Decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The bytes of `text` (UTF-8 for a JS string) as a byte string. */
export function byteString(text: string | Uint8Array): string {
  const bytes = typeof text === "string" ? utf8Encoder.encode(text) : text;
  let out = "";
  // Chunked: String.fromCharCode with a huge spread overflows the stack.
  for (let i = 0; i < bytes.length; i += 8192) {
    out += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return out;
}

/** The bytes a byte string stands for. */
export function bytesOf(bs: string): Uint8Array {
  const out = new Uint8Array(bs.length);
  for (let i = 0; i < bs.length; i++) out[i] = bs.charCodeAt(i);
  return out;
}

/** The UTF-8 text of a byte string, or null when it is not valid UTF-8. */
export function textOf(bs: string): string | null {
  try {
    return utf8Decoder.decode(bytesOf(bs));
  } catch {
    return null;
  }
}

/** A str value: text when the bytes are UTF-8, else the raw bytes (sops keeps them as-is). */
export function strValue(bs: string): string | Uint8Array {
  return textOf(bs) ?? bytesOf(bs);
}

/**
 * Go's unicode.IsSpace, as UTF-8 byte sequences: the ASCII six plus U+0085, U+00A0 and the
 * White_Space runes above Latin-1. (JS `\s` differs: it includes U+FEFF, which Go does not.)
 */
const ASCII_SPACE = new Set(["\t", "\n", "\v", "\f", "\r", " "]);
const WIDE_SPACES: readonly string[] = [
  0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
  0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
].map((cp) => byteString(String.fromCodePoint(cp)));

function spaceAt(bs: string, i: number): number {
  const c = bs[i];
  if (c === undefined) return 0;
  if (ASCII_SPACE.has(c)) return 1;
  if (c < "\xc2") return 0;
  for (const s of WIDE_SPACES) if (bs.startsWith(s, i)) return s.length;
  return 0;
}

function spaceBefore(bs: string, end: number): number {
  const c = bs[end - 1];
  if (c === undefined) return 0;
  if (ASCII_SPACE.has(c)) return 1;
  if (c < "\x80") return 0;
  for (const s of WIDE_SPACES) if (end >= s.length && bs.startsWith(s, end - s.length)) return s.length;
  return 0;
}

/** Go strings.TrimLeftFunc(s, unicode.IsSpace) on a byte string. */
export function trimLeftSpace(bs: string): string {
  let i = 0;
  for (let n = spaceAt(bs, i); n > 0; n = spaceAt(bs, i)) i += n;
  return bs.slice(i);
}

/** Go strings.TrimSpace on a byte string. */
export function trimSpace(bs: string): string {
  const left = trimLeftSpace(bs);
  let end = left.length;
  for (let n = spaceBefore(left, end); n > 0; n = spaceBefore(left, end)) end -= n;
  return left.slice(0, end);
}

/** Go strings.IndexAny for an ASCII set. */
export function indexOfAny(bs: string, chars: string, from = 0): number {
  for (let i = from; i < bs.length; i++) if (chars.includes(bs[i] as string)) return i;
  return -1;
}

/**
 * A scalar as sops's stores.ValToString writes it in a flat file: strings as they are,
 * ints in decimal, bools `true`/`false`, floats in Go's %G form with a `.0` added when the
 * result looks like an integer, times in RFC 3339 (seconds), and Go's %v for the rest.
 */
export function scalarText(s: Scalar): string | Uint8Array {
  switch (s.type) {
    case "str":
      return s.value;
    case "int":
      return s.value.toString(10);
    case "bool":
      return s.value ? "true" : "false";
    case "float":
      return goFloatText(s.value);
    case "time":
      // Held in MarshalText form; time.RFC3339 drops the fractional seconds.
      return s.value.replace(/^([^T]*T\d\d:\d\d:\d\d)\.\d+/, "$1");
    case "bytes":
      // Go's %v of a []byte.
      return `[${Array.from(s.value).join(" ")}]`;
    case "null":
      // Go's %v of nil.
      return "<nil>";
  }
}

/** strconv.FormatFloat(v, 'G', -1, 64), then 'f' with one decimal if it has no '.' or 'E'. */
function goFloatText(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return v > 0 ? "+Inf" : "-Inf";
  const sign = v < 0 || Object.is(v, -0) ? "-" : "";
  if (v === 0) return `${sign}0.0`;
  // toExponential() with no argument gives the shortest round-trip digits, as Go's -1 does.
  const [mantissa = "", expText = "0"] = Math.abs(v).toExponential().split("e");
  const digits = mantissa.replace(".", "");
  const exp = Number(expText);
  // Shortest %G switches to exponent form below 1e-4 and from 1e6 (eprec is 6 when shortest).
  if (exp < -4 || exp >= 6) {
    const frac = digits.length > 1 ? `.${digits.slice(1)}` : "";
    const e = String(Math.abs(exp)).padStart(2, "0");
    return `${sign}${digits[0]}${frac}E${exp < 0 ? "-" : "+"}${e}`;
  }
  let text: string;
  if (exp < 0) {
    text = `0.${"0".repeat(-exp - 1)}${digits}`;
  } else if (digits.length > exp + 1) {
    text = `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  } else {
    text = `${digits.padEnd(exp + 1, "0")}.0`;
  }
  return sign + text;
}
