/**
 * TPM 2.0 structures the service reads (TCG TPM 2.0 Library, Part 2): TPMT_PUBLIC (an
 * endorsement or attestation key), TPMS_ATTEST (a quote), TPMT_SIGNATURE, and the object
 * name. Hand-decoded over node:crypto because no TPM library for Node is kept (the npm
 * packages that parse these structures are unmaintained or wrap native TSS builds); the few
 * structures needed are small and fixed by the specification, and the tests cross-check them
 * with tpm2-tools. Big-endian throughout, as the TPM marshals. Any short or malformed input
 * throws TpmWireError.
 */
import { createHash, createPublicKey, type KeyObject, verify as verifySignature } from "node:crypto";

export class TpmWireError extends Error {}

export const TPM_ALG = {
  RSA: 0x0001,
  SHA1: 0x0004,
  SHA256: 0x000b,
  SHA384: 0x000c,
  SHA512: 0x000d,
  NULL: 0x0010,
  AES: 0x0006,
  CFB: 0x0043,
  RSASSA: 0x0014,
  RSAPSS: 0x0016,
  ECDSA: 0x0018,
  ECC: 0x0023,
} as const;

/** TPM_ALG_ID of a hash -> its node:crypto name and digest size. */
export const HASHES: ReadonlyMap<number, { readonly name: string; readonly size: number }> = new Map([
  [TPM_ALG.SHA1, { name: "sha1", size: 20 }],
  [TPM_ALG.SHA256, { name: "sha256", size: 32 }],
  [TPM_ALG.SHA384, { name: "sha384", size: 48 }],
  [TPM_ALG.SHA512, { name: "sha512", size: 64 }],
]);

/** TPM_ECC_CURVE -> the curve's node:crypto / JWK name and coordinate size. */
export const CURVES: ReadonlyMap<number, { readonly jwk: string; readonly size: number }> = new Map([
  [0x0003, { jwk: "P-256", size: 32 }],
  [0x0004, { jwk: "P-384", size: 48 }],
  [0x0005, { jwk: "P-521", size: 66 }],
]);

/** TPMA_OBJECT bits (Part 2 §8.3). */
export const TPMA = {
  fixedTPM: 1 << 1,
  fixedParent: 1 << 4,
  sensitiveDataOrigin: 1 << 5,
  userWithAuth: 1 << 6,
  adminWithPolicy: 1 << 7,
  restricted: 1 << 16,
  decrypt: 1 << 17,
  sign: 1 << 18,
} as const;

export const TPM_GENERATED_VALUE = 0xff544347;
export const TPM_ST_ATTEST_QUOTE = 0x8018;

/** A cursor over a marshaled structure. */
export class Reader {
  private at = 0;
  private readonly buf: Buffer;
  constructor(buf: Buffer) {
    this.buf = buf;
  }
  private take(n: number): Buffer {
    if (this.at + n > this.buf.length) throw new TpmWireError("structure too short");
    const out = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
  u8(): number {
    return this.take(1).readUInt8(0);
  }
  u16(): number {
    return this.take(2).readUInt16BE(0);
  }
  u32(): number {
    return this.take(4).readUInt32BE(0);
  }
  bytes(n: number): Buffer {
    return this.take(n);
  }
  /** A TPM2B: a 16-bit size, then that many bytes. */
  sized(): Buffer {
    return this.take(this.u16());
  }
  end(what: string): void {
    if (this.at !== this.buf.length) throw new TpmWireError(`${what}: trailing bytes`);
  }
}

/** TPM2B framing: a 16-bit size before the bytes. */
export function sized(bytes: Buffer): Buffer {
  const out = Buffer.alloc(2 + bytes.length);
  out.writeUInt16BE(bytes.length, 0);
  bytes.copy(out, 2);
  return out;
}

export interface TpmPublic {
  /** The TPMT_PUBLIC bytes, as hashed into the name. */
  readonly raw: Buffer;
  readonly type: number;
  readonly nameAlg: number;
  readonly attributes: number;
  readonly authPolicy: Buffer;
  /** TPMT_SYM_DEF_OBJECT: the algorithm (NULL for a signing key), key bits, mode. */
  readonly symmetric: { readonly algorithm: number; readonly keyBits: number; readonly mode: number };
  /** The signing scheme and its hash (NULL, 0 when the key leaves it to the command). */
  readonly scheme: { readonly algorithm: number; readonly hash: number };
  /** ECC keys only. */
  readonly curve?: number;
  readonly key: KeyObject;
}

function symDef(r: Reader): TpmPublic["symmetric"] {
  const algorithm = r.u16();
  if (algorithm === TPM_ALG.NULL) return { algorithm, keyBits: 0, mode: 0 };
  return { algorithm, keyBits: r.u16(), mode: r.u16() };
}

function scheme(r: Reader): TpmPublic["scheme"] {
  const algorithm = r.u16();
  if (algorithm === TPM_ALG.NULL) return { algorithm, hash: 0 };
  const hash = r.u16();
  if (algorithm === 0x001a /* ECDAA */) r.u16();
  return { algorithm, hash };
}

const b64url = (b: Buffer): string => b.toString("base64url");

/** A TPM2B_PUBLIC (what tpm2_createek/createak -u write) or a bare TPMT_PUBLIC. */
export function parsePublic(bytes: Buffer): TpmPublic {
  const framed = bytes.length >= 2 && bytes.readUInt16BE(0) === bytes.length - 2;
  const raw = framed ? bytes.subarray(2) : bytes;
  const r = new Reader(raw);
  const type = r.u16();
  const nameAlg = r.u16();
  const attributes = r.u32();
  const authPolicy = r.sized();
  if (!HASHES.has(nameAlg)) throw new TpmWireError(`unsupported name algorithm 0x${nameAlg.toString(16)}`);
  let out: TpmPublic;
  if (type === TPM_ALG.RSA) {
    const symmetric = symDef(r);
    const s = scheme(r);
    const keyBits = r.u16();
    const exponent = r.u32() || 65537;
    const modulus = r.sized();
    if (modulus.length * 8 !== keyBits) throw new TpmWireError("RSA modulus size differs from keyBits");
    const e = Buffer.alloc(4);
    e.writeUInt32BE(exponent);
    const key = createPublicKey({
      key: { kty: "RSA", n: b64url(modulus), e: b64url(e.subarray(e.findIndex((x) => x !== 0))) },
      format: "jwk",
    });
    out = { raw, type, nameAlg, attributes, authPolicy, symmetric, scheme: s, key };
  } else if (type === TPM_ALG.ECC) {
    const symmetric = symDef(r);
    const s = scheme(r);
    const curveId = r.u16();
    scheme(r); // kdf: TPMT_KDF_SCHEME has the same shape
    const x = r.sized();
    const y = r.sized();
    const curve = CURVES.get(curveId);
    if (!curve) throw new TpmWireError(`unsupported ECC curve 0x${curveId.toString(16)}`);
    if (x.length !== curve.size || y.length !== curve.size) throw new TpmWireError("ECC point size");
    const key = createPublicKey({
      key: { kty: "EC", crv: curve.jwk, x: b64url(x), y: b64url(y) },
      format: "jwk",
    });
    out = { raw, type, nameAlg, attributes, authPolicy, symmetric, scheme: s, curve: curveId, key };
  } else {
    throw new TpmWireError(`unsupported key type 0x${type.toString(16)}`);
  }
  r.end("TPMT_PUBLIC");
  return out;
}

/** The object's name: nameAlg, then the nameAlg digest of its TPMT_PUBLIC (Part 1 §16). */
export function objectName(pub: TpmPublic): Buffer {
  const hash = HASHES.get(pub.nameAlg) as { name: string };
  const alg = Buffer.alloc(2);
  alg.writeUInt16BE(pub.nameAlg);
  return Buffer.concat([alg, createHash(hash.name).update(pub.raw).digest()]);
}

/** SHA-256 of the key's SubjectPublicKeyInfo (DER): how an EK is enrolled by its hash. */
export function publicKeySha256(key: KeyObject): string {
  return createHash("sha256")
    .update(key.export({ format: "der", type: "spki" }))
    .digest("hex");
}

export interface PcrSelection {
  readonly hash: number;
  /** PCR indices, ascending. */
  readonly pcrs: readonly number[];
}

export interface QuoteAttest {
  readonly qualifiedSigner: Buffer;
  readonly extraData: Buffer;
  readonly selections: readonly PcrSelection[];
  readonly pcrDigest: Buffer;
}

/** A TPMS_ATTEST of type quote (what tpm2_quote -m writes). */
export function parseQuote(bytes: Buffer): QuoteAttest {
  const r = new Reader(bytes);
  if (r.u32() !== TPM_GENERATED_VALUE) throw new TpmWireError("not generated by a TPM (magic)");
  if (r.u16() !== TPM_ST_ATTEST_QUOTE) throw new TpmWireError("not a quote");
  const qualifiedSigner = r.sized();
  const extraData = r.sized();
  r.bytes(8 + 4 + 4 + 1); // clockInfo: clock, resetCount, restartCount, safe
  r.bytes(8); // firmwareVersion
  const count = r.u32();
  if (count > 16) throw new TpmWireError("too many PCR banks");
  const selections: PcrSelection[] = [];
  for (let i = 0; i < count; i++) {
    const hash = r.u16();
    const select = r.bytes(r.u8());
    const pcrs: number[] = [];
    select.forEach((byte, j) => {
      for (let bit = 0; bit < 8; bit++) if (byte & (1 << bit)) pcrs.push(j * 8 + bit);
    });
    selections.push({ hash, pcrs });
  }
  const pcrDigest = r.sized();
  r.end("TPMS_ATTEST");
  return { qualifiedSigner, extraData, selections, pcrDigest };
}

/**
 * True when the TPMT_SIGNATURE (what tpm2_quote -s writes) is `key`'s signature over
 * `message`: RSASSA, RSAPSS or ECDSA, with the hash the signature names.
 */
export function signatureVerifies(signature: Buffer, message: Buffer, key: KeyObject): boolean {
  const r = new Reader(signature);
  const alg = r.u16();
  const hash = HASHES.get(r.u16());
  if (!hash) throw new TpmWireError("unsupported signature hash");
  if (alg === TPM_ALG.RSASSA || alg === TPM_ALG.RSAPSS) {
    const sig = r.sized();
    r.end("TPMT_SIGNATURE");
    if (key.asymmetricKeyType !== "rsa") return false;
    return alg === TPM_ALG.RSASSA
      ? verifySignature(hash.name, message, key, sig)
      : verifySignature(
          hash.name,
          message,
          { key, padding: 6 /* RSA_PKCS1_PSS_PADDING */, saltLength: -2 },
          sig,
        );
  }
  if (alg === TPM_ALG.ECDSA) {
    const rr = r.sized();
    const ss = r.sized();
    r.end("TPMT_SIGNATURE");
    if (key.asymmetricKeyType !== "ec") return false;
    const size = CURVES.get(curveOf(key))?.size ?? 0;
    if (rr.length > size || ss.length > size) return false;
    const pad = (b: Buffer): Buffer => Buffer.concat([Buffer.alloc(size - b.length), b]);
    return verifySignature(
      hash.name,
      message,
      { key, dsaEncoding: "ieee-p1363" },
      Buffer.concat([pad(rr), pad(ss)]),
    );
  }
  throw new TpmWireError(`unsupported signature algorithm 0x${alg.toString(16)}`);
}

function curveOf(key: KeyObject): number {
  const crv = key.export({ format: "jwk" }).crv;
  for (const [id, c] of CURVES) if (c.jwk === crv) return id;
  return 0;
}
