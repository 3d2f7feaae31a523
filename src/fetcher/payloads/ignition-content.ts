/**
 * The bytes of one Ignition resource (`contents` or an `append` fragment): a `data:` URL
 * (RFC 2397: base64 or percent-encoded), optionally gzip-compressed, checked against
 * `verification.hash` (sha512- or sha256-, over the decompressed bytes, as Ignition checks it).
 * Remote schemes (http, https, tftp, s3, arn, gs) are valid Ignition but not fetched here: the
 * fetcher runs after boot with the machine's payload already decrypted, and a second download
 * would need its own trust, retries and size rules; such a file is refused by name.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { gunzipSync } from "node:zlib";
import { BootsealError } from "../../errors.ts";
import { describeBytes, MAX_DOCUMENT_BYTES } from "../../limits.ts";

export interface Resource {
  readonly source?: string;
  readonly compression?: string;
  readonly verification?: { readonly hash?: string };
}

const REMOTE = new Set(["http", "https", "tftp", "s3", "arn", "gs"]);

function bad(where: string, message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `ignition config: ${where}: ${message}`);
}

/** The scheme of a source URL, lower case, or "" when it has none. */
export function schemeOf(source: string): string {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(source);
  return m ? (m[1] as string).toLowerCase() : "";
}

/** Checks a source as Ignition's validator does, and refuses the remote ones; throws. */
export function checkSource(source: string, where: string): void {
  if (source === "") return; // an empty source is an empty file
  const scheme = schemeOf(source);
  if (REMOTE.has(scheme)) {
    throw new BootsealError(
      "UNSUPPORTED",
      `ignition config: ${where}: ${scheme} sources are not fetched by bootseal fetch (only data: URLs; put the bytes into the config)`,
    );
  }
  if (scheme !== "data")
    throw bad(where, "source has no supported scheme (data:, or Ignition's remote ones)");
  decodeDataUrl(source, where);
}

function percentDecode(text: string, where: string): Uint8Array {
  const out: number[] = [];
  const utf8 = new TextEncoder();
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (c === "%") {
      const hex = text.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) throw bad(where, "source is a data: URL with a bad %-escape");
      out.push(Number.parseInt(hex, 16));
      i += 2;
    } else {
      const code = text.codePointAt(i) as number;
      if (code > 0xffff) i++;
      for (const b of utf8.encode(String.fromCodePoint(code))) out.push(b);
    }
  }
  return Uint8Array.from(out);
}

/** RFC 2397: `data:[<mediatype>][;base64],<data>`. */
export function decodeDataUrl(source: string, where: string): Uint8Array {
  const comma = source.indexOf(",");
  if (schemeOf(source) !== "data" || comma < 0) throw bad(where, "source is not a data: URL");
  const params = source.slice(5, comma).split(";");
  const data = source.slice(comma + 1);
  if ((params.at(-1) ?? "").toLowerCase() === "base64") {
    const text = percentDecode(data, where);
    const b64 = new TextDecoder().decode(text).replace(/[\r\n]/g, "");
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0) {
      throw bad(where, "source is a data: URL whose base64 is not valid");
    }
    return new Uint8Array(Buffer.from(b64, "base64"));
  }
  return percentDecode(data, where);
}

/** Checks verification.hash's form (`sha512-<128 hex>`, `sha256-<64 hex>`). */
export function checkHashForm(hash: string, where: string): void {
  const dash = hash.indexOf("-");
  if (dash < 0) throw bad(where, "verification.hash is not TYPE-HEX");
  const fn = hash.slice(0, dash);
  const hex = hash.slice(dash + 1);
  const size = fn === "sha512" ? 128 : fn === "sha256" ? 64 : 0;
  if (size === 0) throw bad(where, "verification.hash must use sha512 or sha256");
  if (hex.length !== size) throw bad(where, `verification.hash: a ${fn} sum has ${size} hex digits`);
}

/** The bytes of a resource with a data: (or empty) source: decoded, decompressed, verified. */
export function resourceBytes(res: Resource, where: string): Uint8Array {
  const source = res.source ?? "";
  let bytes = source === "" ? new Uint8Array(0) : decodeDataUrl(source, where);
  if (res.compression === "gzip") {
    try {
      bytes = new Uint8Array(gunzipSync(bytes, { maxOutputLength: MAX_DOCUMENT_BYTES }));
    } catch (err) {
      const tooLarge = (err as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE";
      if (tooLarge) {
        throw new BootsealError(
          "TOO_LARGE",
          `ignition config: ${where}: decompresses to more than ${describeBytes(MAX_DOCUMENT_BYTES)}`,
        );
      }
      throw bad(where, "contents are not valid gzip");
    }
  }
  const hash = res.verification?.hash;
  if (hash !== undefined) {
    const dash = hash.indexOf("-");
    const want = Buffer.from(hash.slice(dash + 1), "hex");
    const got = createHash(hash.slice(0, dash)).update(bytes).digest();
    if (want.length !== got.length || !timingSafeEqual(want, got)) {
      throw bad(where, "the contents do not match verification.hash");
    }
  }
  return bytes;
}
