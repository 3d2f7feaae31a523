/**
 * age's SSH recipient types, `ssh-ed25519` and `ssh-rsa` (C2SP age.md; Go's `agessh`, which
 * sops uses), as typage `Recipient`s and `Identity`s. Written here because age-encryption
 * (typage 0.3.1) has no SSH support; built only from node:crypto (X25519, HKDF-SHA-256,
 * ChaCha20-Poly1305, RSA-OAEP-SHA-256). Also the SSH identity sources sops reads
 * (`age/keysource.go` loadAgeSSHIdentities).
 */
import {
  constants,
  createCipheriv,
  createDecipheriv,
  createHash,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  hkdfSync,
  privateDecrypt,
  publicEncrypt,
  randomBytes,
} from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Identity, Recipient, Stanza } from "age-encryption";
import { BootsealError, type ErrorCode } from "../../src/errors.ts";
import { parseAuthorizedKey, parsePrivateKey, type SshPublicKey } from "./age-ssh-keys.ts";

/** typage reads a stanza's two fields only: a plain object keeps typage out of start-up. */
const stanza = (args: string[], body: Uint8Array): Stanza => ({ args, body });

const ED25519_LABEL = "age-encryption.org/v1/ssh-ed25519";
const RSA_LABEL = "age-encryption.org/v1/ssh-rsa";
const FILE_KEY_BYTES = 16;

const X25519_PKCS8 = Buffer.from("302e020100300506032b656e04220420", "hex");
const X25519_SPKI = Buffer.from("302a300506032b656e032100", "hex");
const BASEPOINT = Buffer.concat([Buffer.of(9), Buffer.alloc(31)]);

/** X25519(scalar, point), clamped as RFC 7748 says; an all-zero result (low-order point) throws. */
function x25519(scalar: Uint8Array, point: Uint8Array): Buffer {
  const privateKey = createPrivateKey({
    key: Buffer.concat([X25519_PKCS8, scalar]),
    format: "der",
    type: "pkcs8",
  });
  const publicKey = createPublicKey({
    key: Buffer.concat([X25519_SPKI, point]),
    format: "der",
    type: "spki",
  });
  try {
    return diffieHellman({ privateKey, publicKey });
  } catch (cause) {
    throw new BootsealError("BAD_INPUT", "age ssh-ed25519: invalid X25519 share", { cause });
  }
}

const P = 2n ** 255n - 19n;
const D = (-121665n * modInverse(121666n)) % P;

function modPow(base: bigint, exp: bigint): bigint {
  let result = 1n;
  let b = ((base % P) + P) % P;
  for (let e = exp; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % P;
    b = (b * b) % P;
  }
  return result;
}

function modInverse(n: bigint): bigint {
  return modPow(n, P - 2n);
}

const le = (bytes: Uint8Array): bigint => BigInt(`0x${Buffer.from(bytes).reverse().toString("hex") || "0"}`);
const toLe = (n: bigint): Buffer => Buffer.from(n.toString(16).padStart(64, "0"), "hex").reverse();

/**
 * The Montgomery u of an Ed25519 public key, u = (1 + y) / (1 - y), after checking the point
 * decodes (y < p and x² = (y² - 1) / (d y² + 1) has a root), as Go's edwards25519 does.
 */
function ed25519ToX25519(point: Uint8Array): Buffer {
  const sign = ((point[31] ?? 0) & 0x80) !== 0;
  const y = le(point) & ((1n << 255n) - 1n);
  if (y >= P) throw new BootsealError("BAD_INPUT", "ssh-ed25519: invalid public key");
  const y2 = (y * y) % P;
  const x2 = (((((y2 - 1n) % P) + P) % P) * modInverse((D * y2 + 1n) % P)) % P;
  const isSquare = x2 === 0n || modPow(x2, (P - 1n) / 2n) === 1n;
  if (!isSquare || (x2 === 0n && sign))
    throw new BootsealError("BAD_INPUT", "ssh-ed25519: invalid public key");
  return toLe(((1n + y) * modInverse((((1n - y) % P) + P) % P)) % P);
}

function hkdf(ikm: Uint8Array, salt: Uint8Array, info: string): Buffer {
  return Buffer.from(hkdfSync("sha256", ikm, salt, info, 32));
}

/** The stanza's first argument: SHA-256 of the SSH wire key, 4 bytes, unpadded base64. */
function tagOf(key: SshPublicKey): string {
  return createHash("sha256").update(key.blob).digest().subarray(0, 4).toString("base64").replace(/=+$/, "");
}

const ZERO_NONCE = Buffer.alloc(12);

function seal(key: Uint8Array, plaintext: Uint8Array): Uint8Array {
  const cipher = createCipheriv("chacha20-poly1305", key, ZERO_NONCE, { authTagLength: 16 });
  return Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
}

function open(key: Uint8Array, sealed: Uint8Array): Uint8Array | null {
  const decipher = createDecipheriv("chacha20-poly1305", key, ZERO_NONCE, { authTagLength: 16 });
  decipher.setAuthTag(sealed.subarray(sealed.length - 16));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - 16)), decipher.final()]);
  } catch {
    return null;
  }
}

/** The ssh-ed25519 wrap key: X25519 with the tweak HKDF(salt = SSH key), then HKDF(salt = share || pk). */
function ed25519WrapKey(key: SshPublicKey, dh: Buffer, share: Uint8Array, ourPoint: Uint8Array): Buffer {
  const tweak = hkdf(new Uint8Array(0), key.blob, ED25519_LABEL);
  const shared = x25519(tweak, dh);
  return hkdf(shared, Buffer.concat([share, ourPoint]), ED25519_LABEL);
}

/** RSA-OAEP with SHA-256 and age's label, both ways. */
const RSA_OAEP = {
  padding: constants.RSA_PKCS1_OAEP_PADDING,
  oaepHash: "sha256",
  oaepLabel: Buffer.from(RSA_LABEL),
} as const;

/** A recipient as sops stores it (`ssh-ed25519 AAAA… [comment]`); BAD_INPUT/UNSUPPORTED if unusable. */
export function sshRecipient(text: string): Recipient {
  const key = parseAuthorizedKey(text);
  if (key.type === "ssh-rsa") {
    const rsa = key.rsa;
    const bits = rsa?.asymmetricKeyDetails?.modulusLength ?? 0;
    if (rsa === undefined || bits < 2048)
      throw new BootsealError("BAD_INPUT", "ssh-rsa: the key is smaller than 2048 bits");
    return {
      wrapFileKey: (fileKey) => [
        stanza(["ssh-rsa", tagOf(key)], publicEncrypt({ key: rsa, ...RSA_OAEP }, fileKey)),
      ],
    };
  }
  const point = ed25519ToX25519(key.ed25519 ?? new Uint8Array(0));
  return {
    wrapFileKey(fileKey) {
      const ephemeral = randomBytes(32);
      const share = x25519(ephemeral, BASEPOINT);
      const wrapKey = ed25519WrapKey(key, x25519(ephemeral, point), share, point);
      const args = ["ssh-ed25519", tagOf(key), share.toString("base64").replace(/=+$/, "")];
      return [stanza(args, seal(wrapKey, fileKey))];
    },
  };
}

function unb64(text: string | undefined, what: string): Buffer {
  if (text === undefined || !/^[A-Za-z0-9+/]*$/.test(text))
    throw new BootsealError("BAD_INPUT", `${what}: bad base64`);
  return Buffer.from(text, "base64");
}

/**
 * An identity from a private key file's text. A matching stanza that fails to open is
 * "not this identity" (agessh's ErrIncorrectIdentity); a malformed one is BAD_INPUT.
 * Passphrase-protected keys: sops asks on the terminal when a stanza matches; bootseal runs
 * unattended, so that case is UNSUPPORTED (the other stanzas still get their chance).
 */
export function sshIdentity(text: string, location: string, publicLine?: string): Identity {
  const parsed = parsePrivateKey(text);
  if (parsed.encrypted) {
    const pub = parsed.pub ?? (publicLine === undefined ? null : parseAuthorizedKey(publicLine));
    if (pub === null) {
      throw new BootsealError("BAD_INPUT", `${location}: passphrase-protected key without ${location}.pub`);
    }
    const tag = tagOf(pub);
    return {
      unwrapFileKey(stanzas) {
        if (!stanzas.some((s) => s.args[0] === pub.type && s.args[1] === tag)) return null;
        throw new BootsealError(
          "UNSUPPORTED",
          `age: ${location} is passphrase-protected; bootseal does not prompt (remove the passphrase or use an age key)`,
        );
      },
    };
  }
  const { pub } = parsed;
  const tag = tagOf(pub);
  if (pub.type === "ssh-rsa") {
    const rsa = parsed.rsa;
    return {
      unwrapFileKey(stanzas) {
        for (const s of stanzas) {
          if (s.args[0] !== "ssh-rsa" || s.args[1] !== tag) continue;
          if (s.args.length !== 2)
            throw new BootsealError("BAD_INPUT", "age: invalid ssh-rsa recipient block");
          try {
            const fileKey = privateDecrypt({ key: rsa as NonNullable<typeof rsa>, ...RSA_OAEP }, s.body);
            if (fileKey.length === FILE_KEY_BYTES) return fileKey;
          } catch {
            // not this key (a tag collision): try the next stanza
          }
        }
        return null;
      },
    };
  }
  const secret = createHash("sha512")
    .update(parsed.seed ?? new Uint8Array(0))
    .digest()
    .subarray(0, 32);
  const ourPoint = x25519(secret, BASEPOINT);
  return {
    unwrapFileKey(stanzas) {
      for (const s of stanzas) {
        if (s.args[0] !== "ssh-ed25519" || s.args[1] !== tag) continue;
        const share = unb64(s.args[2], "age ssh-ed25519 share");
        if (s.args.length !== 3 || share.length !== 32 || s.body.length !== FILE_KEY_BYTES + 16) {
          throw new BootsealError("BAD_INPUT", "age: invalid ssh-ed25519 recipient block");
        }
        const fileKey = open(ed25519WrapKey(pub, x25519(secret, share), share, ourPoint), s.body);
        if (fileKey !== null) return fileKey;
      }
      return null;
    },
  };
}

type Env = Readonly<Record<string, string | undefined>>;

export interface SshIdentities {
  readonly identities: Identity[];
  readonly errors: { readonly code: ErrorCode; readonly message: string }[];
}

async function fromFile(path: string): Promise<Identity> {
  const text = await readFile(path, "utf8").catch(() => {
    throw new BootsealError("IO_ERROR", `cannot read SSH key ${path}`);
  });
  const publicLine = /ENCRYPTED/.test(text)
    ? await readFile(`${path}.pub`, "utf8").catch(() => undefined)
    : undefined;
  return sshIdentity(text, path, publicLine);
}

function reason(err: unknown, fallback: string): { code: ErrorCode; message: string } {
  if (err instanceof BootsealError) return { code: err.code, message: err.message };
  return { code: "IO_ERROR", message: fallback };
}

/**
 * sops's SSH identity sources, in its order: SOPS_AGE_SSH_PRIVATE_KEY_FILE,
 * SOPS_AGE_SSH_PRIVATE_KEY_CMD (run with SOPS_AGE_RECIPIENT; skipped without a recipient),
 * then `$HOME/.ssh/id_ed25519` and `$HOME/.ssh/id_rsa` when they exist. A failing source is
 * noted and the others still count. `runCommand` is age.ts's key command runner.
 */
export async function loadSshIdentities(
  env: Env,
  recipient: string | undefined,
  runCommand: (command: string) => Promise<string>,
): Promise<SshIdentities> {
  const identities: Identity[] = [];
  const errors: { code: ErrorCode; message: string }[] = [];
  const file = env.SOPS_AGE_SSH_PRIVATE_KEY_FILE;
  if (file !== undefined) {
    try {
      identities.push(await fromFile(file));
    } catch (err) {
      errors.push(reason(err, `SOPS_AGE_SSH_PRIVATE_KEY_FILE: cannot read ${file}`));
    }
  }
  const command = env.SOPS_AGE_SSH_PRIVATE_KEY_CMD;
  if (command !== undefined && recipient !== undefined) {
    try {
      const text = await runCommand(command);
      const key = parsePrivateKey(text);
      if (key.encrypted) {
        throw new BootsealError(
          "UNSUPPORTED",
          "SOPS_AGE_SSH_PRIVATE_KEY_CMD: the key is passphrase-protected",
        );
      }
      identities.push(sshIdentity(text, "SOPS_AGE_SSH_PRIVATE_KEY_CMD"));
    } catch (err) {
      const r = reason(err, "SOPS_AGE_SSH_PRIVATE_KEY_CMD: command failed");
      errors.push(
        err instanceof BootsealError
          ? { code: r.code, message: `SOPS_AGE_SSH_PRIVATE_KEY_CMD: ${r.message}` }
          : r,
      );
    }
  }
  if (env.HOME) {
    for (const name of ["id_ed25519", "id_rsa"]) {
      const path = join(env.HOME, ".ssh", name);
      try {
        identities.push(await fromFile(path));
      } catch (err) {
        // Absent default keys are normal; sops only stats them.
        const missing = await readFile(path).then(
          () => false,
          (e: NodeJS.ErrnoException) => e.code === "ENOENT",
        );
        if (!missing) errors.push(reason(err, `cannot read ${path}`));
      }
    }
  }
  return { identities, errors };
}
