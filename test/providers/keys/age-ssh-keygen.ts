/**
 * SSH key pairs for the age SSH tests, written in OpenSSH's own formats (`openssh-key-v1`
 * private keys, authorized_keys public lines) from node:crypto keys, so the tests need no
 * openssh-client. The real age and sops read these files in the interop tests, which checks
 * the writer too.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";

export interface SshKeyPair {
  /** The private key file's text. */
  readonly privateKey: string;
  /** The `.pub` line: `TYPE BASE64 comment`. */
  readonly publicKey: string;
  /** The public line without the comment. */
  readonly recipient: string;
}

function str(bytes: Uint8Array | string): Buffer {
  const body = typeof bytes === "string" ? Buffer.from(bytes) : Buffer.from(bytes);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(body.length);
  return Buffer.concat([len, body]);
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

function mpint(b64url: string | undefined): Buffer {
  let body = Buffer.from(b64url ?? "", "base64url");
  while (body.length > 1 && body[0] === 0) body = body.subarray(1);
  return str((body[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.of(0), body]) : body);
}

function armor(bytes: Buffer): string {
  const lines = bytes.toString("base64").match(/.{1,70}/g) ?? [];
  return `-----BEGIN OPENSSH PRIVATE KEY-----\n${lines.join("\n")}\n-----END OPENSSH PRIVATE KEY-----\n`;
}

function opensshFile(pubBlob: Buffer, secret: Buffer[], comment: string, encrypted: boolean): string {
  const check = randomBytes(4);
  let section = Buffer.concat([check, check, ...secret, str(comment)]);
  const block = encrypted ? 16 : 8;
  const pad: number[] = [];
  for (let i = 1; (section.length + pad.length) % block !== 0; i++) pad.push(i);
  section = Buffer.concat([section, Buffer.from(pad)]);
  // A passphrase-protected key: only the public half is readable without the passphrase,
  // so random bytes stand in for the aes256-ctr ciphertext.
  const kdf = encrypted ? str(Buffer.concat([str(randomBytes(16)), u32(16)])) : str("");
  const body = Buffer.concat([
    Buffer.from("openssh-key-v1\0", "latin1"),
    str(encrypted ? "aes256-ctr" : "none"),
    str(encrypted ? "bcrypt" : "none"),
    kdf,
    u32(1),
    str(pubBlob),
    str(encrypted ? randomBytes(section.length) : section),
  ]);
  return armor(body);
}

/** A fresh key pair; `pem`: an RSA key as PKCS#1 PEM (`ssh-keygen -m PEM`). */
export function sshKeyPair(
  type: "ed25519" | "rsa",
  options: { bits?: number; pem?: boolean; encrypted?: boolean; comment?: string } = {},
): SshKeyPair {
  const comment = options.comment ?? "bootseal-test";
  if (type === "ed25519") {
    const { privateKey } = generateKeyPairSync("ed25519");
    const jwk = privateKey.export({ format: "jwk" });
    const pub = Buffer.from(jwk.x ?? "", "base64url");
    const seed = Buffer.from(jwk.d ?? "", "base64url");
    const blob = Buffer.concat([str("ssh-ed25519"), str(pub)]);
    const secret = [str("ssh-ed25519"), str(pub), str(Buffer.concat([seed, pub]))];
    const recipient = `ssh-ed25519 ${blob.toString("base64")}`;
    return {
      privateKey: opensshFile(blob, secret, comment, options.encrypted === true),
      publicKey: `${recipient} ${comment}\n`,
      recipient,
    };
  }
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: options.bits ?? 2048 });
  const jwk = privateKey.export({ format: "jwk" });
  const blob = Buffer.concat([str("ssh-rsa"), mpint(jwk.e), mpint(jwk.n)]);
  const recipient = `ssh-rsa ${blob.toString("base64")}`;
  const text = options.pem
    ? String(privateKey.export({ format: "pem", type: "pkcs1" }))
    : opensshFile(
        blob,
        [str("ssh-rsa"), ...[jwk.n, jwk.e, jwk.d, jwk.qi, jwk.p, jwk.q].map(mpint)],
        comment,
        options.encrypted === true,
      );
  return { privateKey: text, publicKey: `${recipient} ${comment}\n`, recipient };
}
