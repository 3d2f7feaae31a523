/**
 * SSH key formats for the age SSH recipients (./age-ssh.ts): authorized_keys lines
 * (`ssh-ed25519 AAAA… comment`), OpenSSH private keys (`openssh-key-v1`), and PEM RSA/PKCS#8
 * private keys, the formats Go's `ssh.ParseAuthorizedKey` and `ssh.ParseRawPrivateKey` read
 * for sops. Only Ed25519 and RSA, the two kinds age has stanzas for. Parsed here with
 * node:crypto because no library in package.json reads OpenSSH's formats.
 */
import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";
import { BootsealError } from "../../src/errors.ts";

export type SshKeyType = "ssh-ed25519" | "ssh-rsa";

/** A public key: its SSH wire encoding (what age hashes and tweaks with) and its parts. */
export interface SshPublicKey {
  readonly type: SshKeyType;
  /** The SSH wire encoding, the base64 field of an authorized_keys line. */
  readonly blob: Uint8Array;
  /** Ed25519: the 32-byte point. */
  readonly ed25519?: Uint8Array;
  /** RSA: the key, for RSA-OAEP. */
  readonly rsa?: KeyObject;
}

export type SshPrivateKey =
  | {
      readonly encrypted: false;
      readonly pub: SshPublicKey;
      readonly seed?: Uint8Array;
      readonly rsa?: KeyObject;
    }
  /** Passphrase-protected: only the public half is readable (null for legacy encrypted PEM). */
  | { readonly encrypted: true; readonly pub: SshPublicKey | null };

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", message);
}

/** The SSH wire format's `string`, `uint32` and `mpint` (RFC 4251 section 5). */
class WireReader {
  private at = 0;
  private readonly bytes: Uint8Array;
  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }
  u32(): number {
    if (this.at + 4 > this.bytes.length) throw bad("SSH key: truncated");
    const view = new DataView(this.bytes.buffer, this.bytes.byteOffset + this.at, 4);
    this.at += 4;
    return view.getUint32(0);
  }
  bytesField(): Uint8Array {
    const n = this.u32();
    if (this.at + n > this.bytes.length) throw bad("SSH key: truncated");
    const out = this.bytes.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
  text(): string {
    return Buffer.from(this.bytesField()).toString("latin1");
  }
  get done(): boolean {
    return this.at === this.bytes.length;
  }
}

function stringField(bytes: Uint8Array): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(bytes.length);
  return Buffer.concat([len, bytes]);
}

/** mpint: big-endian, minimal, a 0x00 prefix when the top bit is set. */
function mpint(unsigned: Uint8Array): Buffer {
  let start = 0;
  while (start < unsigned.length && unsigned[start] === 0) start++;
  const body = unsigned.subarray(start);
  return stringField((body[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.of(0), body]) : Buffer.from(body));
}

/** An mpint's magnitude without the sign byte (SSH keys' numbers are positive). */
function unsigned(bytes: Uint8Array): Buffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  return Buffer.from(bytes.subarray(start));
}

const b64url = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url");

function rsaPublic(e: Uint8Array, n: Uint8Array): SshPublicKey {
  const blob = Buffer.concat([stringField(Buffer.from("ssh-rsa")), mpint(e), mpint(n)]);
  const rsa = createPublicKey({
    key: { kty: "RSA", n: b64url(unsigned(n)), e: b64url(unsigned(e)) },
    format: "jwk",
  });
  return { type: "ssh-rsa", blob, rsa };
}

function ed25519Public(point: Uint8Array): SshPublicKey {
  if (point.length !== 32) throw bad("SSH key: an Ed25519 key must be 32 bytes");
  const blob = Buffer.concat([stringField(Buffer.from("ssh-ed25519")), stringField(point)]);
  return { type: "ssh-ed25519", blob, ed25519: Buffer.from(point) };
}

/** A public key from its wire encoding; UNSUPPORTED for key types age has no stanza for. */
export function publicKeyFromBlob(blob: Uint8Array): SshPublicKey {
  const r = new WireReader(blob);
  const type = r.text();
  if (type === "ssh-ed25519") {
    const key = ed25519Public(r.bytesField());
    if (!r.done) throw bad("SSH key: trailing data");
    return key;
  }
  if (type === "ssh-rsa") {
    const e = r.bytesField();
    const n = r.bytesField();
    if (!r.done) throw bad("SSH key: trailing data");
    return rsaPublic(e, n);
  }
  throw new BootsealError(
    "UNSUPPORTED",
    `SSH key type ${type} is not supported by age (ssh-ed25519, ssh-rsa)`,
  );
}

/**
 * An authorized_keys line as sops takes it for a recipient: `TYPE BASE64 [comment]`.
 * Go's ParseAuthorizedKey also skips leading options; an age recipient never has any.
 */
export function parseAuthorizedKey(line: string): SshPublicKey {
  const [type, data] = line.trim().split(/\s+/);
  if (type === undefined || data === undefined || !/^[A-Za-z0-9+/]+={0,2}$/.test(data)) {
    throw bad("SSH public key: expected 'TYPE BASE64 [comment]'");
  }
  const key = publicKeyFromBlob(Buffer.from(data, "base64"));
  if (key.type !== type) throw bad(`SSH public key: the line says ${type}, the key is ${key.type}`);
  return key;
}

const OPENSSH_MAGIC = Buffer.from("openssh-key-v1\0", "latin1");

function pemBody(text: string, label: string): Buffer | null {
  const m = new RegExp(`-----BEGIN ${label}-----\\r?\\n([\\s\\S]*?)-----END ${label}-----`).exec(text);
  if (!m) return null;
  // Legacy PEM headers (Proc-Type, DEK-Info) come before a blank line.
  const body = m[1] ?? "";
  const parts = body.split(/\r?\n\r?\n/);
  return Buffer.from((parts.length > 1 ? parts.slice(1).join("") : body).replace(/\s+/g, ""), "base64");
}

function fromOpenSsh(bytes: Buffer): SshPrivateKey {
  if (!bytes.subarray(0, OPENSSH_MAGIC.length).equals(OPENSSH_MAGIC))
    throw bad("SSH private key: not openssh-key-v1");
  const r = new WireReader(bytes.subarray(OPENSSH_MAGIC.length));
  const cipher = r.text();
  r.text(); // kdf name
  r.bytesField(); // kdf options
  if (r.u32() !== 1) throw bad("SSH private key: expected exactly one key");
  const pub = publicKeyFromBlob(r.bytesField());
  const secret = r.bytesField();
  if (cipher !== "none") return { encrypted: true, pub };
  const s = new WireReader(secret);
  const check = s.u32();
  if (check !== s.u32()) throw bad("SSH private key: check bytes differ");
  const type = s.text();
  if (type !== pub.type) throw bad("SSH private key: public and private parts differ");
  if (type === "ssh-ed25519") {
    s.bytesField(); // the public point again
    const priv = s.bytesField();
    if (priv.length !== 64) throw bad("SSH private key: an Ed25519 private key must be 64 bytes");
    return { encrypted: false, pub, seed: Buffer.from(priv.subarray(0, 32)) };
  }
  const [n, e, d, iqmp, p, q] = [0, 1, 2, 3, 4, 5].map(() => unsigned(s.bytesField())) as Buffer[] as [
    Buffer,
    Buffer,
    Buffer,
    Buffer,
    Buffer,
    Buffer,
  ];
  return { encrypted: false, pub, rsa: rsaPrivate(n, e, d, p, q, iqmp) };
}

function big(bytes: Uint8Array): bigint {
  return bytes.length === 0 ? 0n : BigInt(`0x${Buffer.from(bytes).toString("hex")}`);
}

function unbig(n: bigint): Buffer {
  const hex = n.toString(16);
  return Buffer.from(hex.length % 2 ? `0${hex}` : hex, "hex");
}

/** OpenSSH stores n, e, d, iqmp, p, q; a JWK also wants d mod (p-1) and d mod (q-1). */
function rsaPrivate(n: Buffer, e: Buffer, d: Buffer, p: Buffer, q: Buffer, iqmp: Buffer): KeyObject {
  const [D, P, Q] = [big(d), big(p), big(q)];
  if (P < 2n || Q < 2n) throw bad("SSH private key: invalid RSA primes");
  const jwk = {
    kty: "RSA",
    n: b64url(n),
    e: b64url(e),
    d: b64url(d),
    p: b64url(p),
    q: b64url(q),
    dp: b64url(unbig(D % (P - 1n))),
    dq: b64url(unbig(D % (Q - 1n))),
    qi: b64url(iqmp),
  };
  try {
    return createPrivateKey({ key: jwk, format: "jwk" });
  } catch (cause) {
    throw new BootsealError("BAD_INPUT", "SSH private key: invalid RSA key", { cause });
  }
}

function fromKeyObject(key: KeyObject): SshPrivateKey {
  if (key.asymmetricKeyType === "ed25519") {
    const jwk = key.export({ format: "jwk" });
    return {
      encrypted: false,
      pub: ed25519Public(Buffer.from(jwk.x ?? "", "base64url")),
      seed: Buffer.from(jwk.d ?? "", "base64url"),
    };
  }
  if (key.asymmetricKeyType === "rsa") {
    const jwk = key.export({ format: "jwk" });
    return {
      encrypted: false,
      pub: rsaPublic(Buffer.from(jwk.e ?? "", "base64url"), Buffer.from(jwk.n ?? "", "base64url")),
      rsa: key,
    };
  }
  throw new BootsealError(
    "UNSUPPORTED",
    `SSH identity type ${key.asymmetricKeyType} is not supported by age`,
  );
}

/**
 * A private key file's contents. Passphrase-protected keys come back `encrypted` (with the
 * public key when the format carries it: OpenSSH does, legacy PEM does not).
 */
export function parsePrivateKey(text: string): SshPrivateKey {
  const openssh = pemBody(text, "OPENSSH PRIVATE KEY");
  if (openssh) return fromOpenSsh(openssh);
  if (/-----BEGIN (RSA |ENCRYPTED )?PRIVATE KEY-----/.test(text)) {
    if (/Proc-Type: 4,ENCRYPTED/.test(text) || text.includes("BEGIN ENCRYPTED PRIVATE KEY")) {
      return { encrypted: true, pub: null };
    }
    try {
      return fromKeyObject(createPrivateKey({ key: text, format: "pem" }));
    } catch (cause) {
      if (cause instanceof BootsealError) throw cause;
      throw new BootsealError("BAD_INPUT", "SSH private key: cannot parse the PEM key", { cause });
    }
  }
  if (/-----BEGIN (EC|DSA) PRIVATE KEY-----/.test(text)) {
    throw new BootsealError(
      "UNSUPPORTED",
      "SSH identity type is not supported by age (ssh-ed25519, ssh-rsa)",
    );
  }
  throw bad("SSH private key: no OpenSSH or PEM private key found");
}
