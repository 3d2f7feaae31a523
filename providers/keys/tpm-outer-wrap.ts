/**
 * The TPM's outer wrapper (TCG TPM 2.0 Part 1 §23.3.2.3 "Outer wrapper" and §24 "Credential
 * Protection"), done with node:crypto: a seed encrypted to a storage parent (the EK: RSA-OAEP
 * or an ephemeral ECDH with KDFe), and a payload encrypted with AES-CFB and protected by an
 * HMAC over it and the protected object's name, both keys from the seed by KDFa. The same
 * construction serves MakeCredential (label "IDENTITY", the login) and duplication (label
 * "DUPLICATE", configs sealed to a TPM: tpm-sealed.ts). Why hand-written: see tpm-wire.ts.
 */
import {
  constants,
  createCipheriv,
  createHash,
  createHmac,
  diffieHellman,
  generateKeyPairSync,
  publicEncrypt,
  randomBytes,
} from "node:crypto";
import { CURVES, HASHES, sized, TPM_ALG, type TpmPublic, TpmWireError } from "./tpm-wire.ts";

export const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
/** Labels are used with their terminating NUL (Part 1 §11.4.10). */
const label = (text: string): Buffer => Buffer.from(`${text}\0`, "latin1");

/** KDFa (Part 1 §11.4.10.2): SP800-108 counter mode with HMAC. */
export function kdfa(
  hash: string,
  key: Buffer,
  use: string,
  contextU: Buffer,
  contextV: Buffer,
  bits: number,
): Buffer {
  const out: Buffer[] = [];
  let have = 0;
  for (let i = 1; have * 8 < bits; i++) {
    const block = createHmac(hash, key)
      .update(Buffer.concat([u32(i), label(use), contextU, contextV, u32(bits)]))
      .digest();
    out.push(block);
    have += block.length;
  }
  return Buffer.concat(out).subarray(0, bits / 8);
}

/** KDFe (Part 1 §11.4.10.3): SP800-56A concatenation KDF over an ECDH shared x-coordinate. */
export function kdfe(
  hash: string,
  z: Buffer,
  use: string,
  partyU: Buffer,
  partyV: Buffer,
  bits: number,
): Buffer {
  const out: Buffer[] = [];
  let have = 0;
  for (let i = 1; have * 8 < bits; i++) {
    const block = createHash(hash)
      .update(Buffer.concat([u32(i), z, label(use), partyU, partyV]))
      .digest();
    out.push(block);
    have += block.length;
  }
  return Buffer.concat(out).subarray(0, bits / 8);
}

/** What the seed is for: its OAEP label or KDFe use. */
export type SeedUse = "IDENTITY" | "DUPLICATE";

/** The seed and its encryption to the parent (Part 1 Annex B.10.3 / C.6.4). */
function seedFor(
  parent: TpmPublic,
  hash: { name: string; size: number },
  use: SeedUse,
): { seed: Buffer; encrypted: Buffer } {
  if (parent.type === TPM_ALG.RSA) {
    const seed = randomBytes(hash.size);
    const encrypted = publicEncrypt(
      {
        key: parent.key,
        padding: constants.RSA_PKCS1_OAEP_PADDING,
        oaepHash: hash.name,
        oaepLabel: label(use),
      },
      seed,
    );
    return { seed, encrypted };
  }
  const curve = CURVES.get(parent.curve ?? 0);
  if (!curve) throw new TpmWireError("unsupported EK curve");
  const ephemeral = generateKeyPairSync("ec", { namedCurve: curve.jwk });
  const z = diffieHellman({ privateKey: ephemeral.privateKey, publicKey: parent.key });
  const point = ephemeral.publicKey.export({ format: "jwk" });
  const parentPoint = parent.key.export({ format: "jwk" });
  const x = Buffer.from(point.x as string, "base64url");
  const y = Buffer.from(point.y as string, "base64url");
  const seed = kdfe(hash.name, z, use, x, Buffer.from(parentPoint.x as string, "base64url"), hash.size * 8);
  return { seed, encrypted: Buffer.concat([sized(x), sized(y)]) };
}

export interface OuterWrapped {
  /** TPM2B_ID_OBJECT or TPM2B_PRIVATE: the integrity HMAC, then the encrypted payload. */
  readonly wrapped: Buffer;
  /** TPM2B_ENCRYPTED_SECRET: the seed, encrypted to the parent. */
  readonly encryptedSeed: Buffer;
}

/**
 * The outer wrapper of `payload` for the object named `name`, under `parent`: a storage key
 * with AES-CFB as its symmetric algorithm (every EK template has it).
 */
export function outerWrap(parent: TpmPublic, use: SeedUse, name: Buffer, payload: Buffer): OuterWrapped {
  const hash = HASHES.get(parent.nameAlg);
  if (!hash) throw new TpmWireError("unsupported EK name algorithm");
  if (parent.symmetric.algorithm !== TPM_ALG.AES || parent.symmetric.mode !== TPM_ALG.CFB) {
    throw new TpmWireError("the EK's symmetric algorithm is not AES-CFB");
  }
  const { seed, encrypted } = seedFor(parent, hash, use);
  const symKey = kdfa(hash.name, seed, "STORAGE", name, Buffer.alloc(0), parent.symmetric.keyBits);
  const cipher = createCipheriv(`aes-${parent.symmetric.keyBits}-cfb`, symKey, Buffer.alloc(16));
  const encryptedPayload = Buffer.concat([cipher.update(payload), cipher.final()]);
  const hmacKey = kdfa(hash.name, seed, "INTEGRITY", Buffer.alloc(0), Buffer.alloc(0), hash.size * 8);
  const integrity = createHmac(hash.name, hmacKey).update(encryptedPayload).update(name).digest();
  return {
    wrapped: sized(Buffer.concat([sized(integrity), encryptedPayload])),
    encryptedSeed: sized(encrypted),
  };
}
