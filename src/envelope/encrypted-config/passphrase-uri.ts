/**
 * passphraseURI: the wrapped data key and the name of the key that wrapped it,
 * `<scheme>://<base64url(wrapped bytes)>@<percent-encoded key id>` (docs/envelope-format.md).
 *
 * The wrapped bytes are the key service's raw ciphertext where sops stores it as base64
 * (AWS/GCP: standard base64; Azure: unpadded base64url), so `kms://…` carries the KMS
 * CiphertextBlob itself, as the Cluster API proposal's example does. Kinds whose `enc` is
 * text (age and PGP armour, Vault's `vault:v1:…`) carry that text's UTF-8 bytes. Each kind's
 * scheme, default provider and enc form come from its KeyKindFormat (`passphrase`), injected
 * as the KeyKinds table.
 */
import { BootsealError } from "../../errors.ts";
import type { KeyKinds, PassphraseFormat } from "../sops/master-key.ts";

/** The passphraseURI format of `kind`; UNSUPPORTED when the kind cannot wrap an EncryptedConfig. */
export function passphraseFormat(kinds: KeyKinds, kind: string): PassphraseFormat {
  const format = kinds.find((k) => k.kind === kind)?.passphrase;
  if (format === undefined) {
    throw new BootsealError("UNSUPPORTED", `${kind} keys cannot wrap an EncryptedConfig`);
  }
  return format;
}

export interface PassphraseUri {
  readonly kind: string;
  /** The master key's identity string (MasterKey.id). */
  readonly keyId: string;
  /** The wrapped data key exactly as MasterKey.wrap returned it. */
  readonly enc: string;
}

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", message);
}

/** Left as is in the key id: unreserved characters plus `:` and `/`, so ARNs and URLs stay readable. */
const KEEP = /^[A-Za-z0-9\-._~:/]$/;

export function percentEncode(text: string): string {
  let out = "";
  for (const byte of new TextEncoder().encode(text)) {
    const ch = String.fromCharCode(byte);
    out += byte < 0x80 && KEEP.test(ch) ? ch : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

function percentDecode(text: string): string {
  if (!/^([A-Za-z0-9\-._~:/]|%[0-9A-F]{2})*$/.test(text)) throw bad("passphraseURI key id is not encoded");
  let decoded: string;
  try {
    decoded = new TextDecoder("utf-8", { fatal: true }).decode(
      Uint8Array.from(text.match(/%[0-9A-F]{2}|[^%]/g) ?? [], (t) =>
        t.length === 3 ? Number.parseInt(t.slice(1), 16) : t.charCodeAt(0),
      ),
    );
  } catch {
    throw bad("passphraseURI key id is not UTF-8");
  }
  // One spelling per key id: `%41` for `A` would otherwise be a second, unauthenticated alias.
  if (percentEncode(decoded) !== text) throw bad("passphraseURI key id is not canonical");
  return decoded;
}

function base64urlDecodeStrict(text: string): Uint8Array {
  if (!/^[A-Za-z0-9_-]+$/.test(text) || text.length % 4 === 1) throw bad("passphraseURI is not base64url");
  const bytes = Buffer.from(text, "base64url");
  if (bytes.toString("base64url") !== text) throw bad("passphraseURI is not canonical base64url");
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** enc -> the bytes the URI carries, per kind; throws when enc is not in the kind's sops form. */
function encToBytes(kind: string, wrapped: PassphraseFormat["wrapped"], enc: string): Uint8Array {
  if (wrapped === "base64") {
    const bytes = Buffer.from(enc, "base64");
    if (enc.length === 0 || bytes.toString("base64") !== enc) {
      throw new BootsealError("INTERNAL", `${kind} key returned an enc that is not canonical base64`);
    }
    return bytes;
  }
  if (wrapped === "base64url") {
    const bytes = Buffer.from(enc, "base64url");
    if (enc.length === 0 || bytes.toString("base64url") !== enc) {
      throw new BootsealError("INTERNAL", `${kind} key returned an enc that is not base64url`);
    }
    return bytes;
  }
  if (enc.length === 0) throw new BootsealError("INTERNAL", `${kind} key returned an empty enc`);
  return new TextEncoder().encode(enc);
}

function bytesToEnc(wrapped: PassphraseFormat["wrapped"], bytes: Uint8Array): string {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (wrapped === "base64") return buf.toString("base64");
  if (wrapped === "base64url") return buf.toString("base64url");
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw bad("passphraseURI wrapped key is not UTF-8");
  }
}

export function formatPassphraseUri(uri: PassphraseUri, kinds: KeyKinds): string {
  if (uri.keyId.length === 0) throw new BootsealError("INTERNAL", "master key has an empty id");
  const format = passphraseFormat(kinds, uri.kind);
  const wrapped = Buffer.from(encToBytes(uri.kind, format.wrapped, uri.enc)).toString("base64url");
  return `${format.scheme}://${wrapped}@${percentEncode(uri.keyId)}`;
}

export function parsePassphraseUri(text: string, kinds: KeyKinds): PassphraseUri {
  const match = /^([a-z]+):\/\/([^@]*)@(.*)$/.exec(text);
  if (!match) throw bad("passphraseURI is malformed");
  const [, scheme = "", wrapped = "", encodedId = ""] = match;
  const found = kinds.find((k) => k.passphrase?.scheme === scheme);
  if (!found?.passphrase) throw bad("passphraseURI has an unknown scheme");
  const keyId = percentDecode(encodedId);
  if (keyId.length === 0) throw bad("passphraseURI has no key id");
  return {
    kind: found.kind,
    keyId,
    enc: bytesToEnc(found.passphrase.wrapped, base64urlDecodeStrict(wrapped)),
  };
}
