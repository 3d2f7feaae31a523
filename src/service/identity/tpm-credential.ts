/**
 * TPM2_MakeCredential done by the service with node:crypto (TCG TPM 2.0 Part 1 §24, "Credential
 * Protection"; Part 3 MakeCredential): a secret only the TPM holding the endorsement key can
 * recover, and only for the object with the given name (TPM2_ActivateCredential checks the
 * name inside the HMAC). The seed goes to the EK by RSA-OAEP (label "IDENTITY") or by an
 * ephemeral ECDH with KDFe; the symmetric key and the HMAC key come from the seed by KDFa.
 * Why hand-written: see tpm-wire.ts; tpm2_makecredential and tpm2_activatecredential check it
 * (test/service/tpm-credential.test.ts).
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

const u32 = (n: number): Buffer => {
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

export interface MadeCredential {
  /** TPM2B_ID_OBJECT: the integrity HMAC and the encrypted credential. */
  readonly credentialBlob: Buffer;
  /** TPM2B_ENCRYPTED_SECRET: the seed, encrypted to the EK. */
  readonly encryptedSecret: Buffer;
}

/** The seed and its encryption to the EK (Part 1 §24.4 and Annex B.10.3 / C.6.4). */
function seedFor(ek: TpmPublic, hash: { name: string; size: number }): { seed: Buffer; encrypted: Buffer } {
  if (ek.type === TPM_ALG.RSA) {
    const seed = randomBytes(hash.size);
    const encrypted = publicEncrypt(
      {
        key: ek.key,
        padding: constants.RSA_PKCS1_OAEP_PADDING,
        oaepHash: hash.name,
        oaepLabel: label("IDENTITY"),
      },
      seed,
    );
    return { seed, encrypted };
  }
  const curve = CURVES.get(ek.curve ?? 0);
  if (!curve) throw new TpmWireError("unsupported EK curve");
  const ephemeral = generateKeyPairSync("ec", { namedCurve: curve.jwk });
  const z = diffieHellman({ privateKey: ephemeral.privateKey, publicKey: ek.key });
  const point = ephemeral.publicKey.export({ format: "jwk" });
  const ekPoint = ek.key.export({ format: "jwk" });
  const x = Buffer.from(point.x as string, "base64url");
  const y = Buffer.from(point.y as string, "base64url");
  const seed = kdfe(
    hash.name,
    z,
    "IDENTITY",
    x,
    Buffer.from(ekPoint.x as string, "base64url"),
    hash.size * 8,
  );
  return { seed, encrypted: Buffer.concat([sized(x), sized(y)]) };
}

/**
 * TPM2_MakeCredential(EK public, credential, object name). The EK must be a storage key with
 * AES-CFB as its symmetric algorithm (every EK template does).
 */
export function makeCredential(ek: TpmPublic, credential: Buffer, name: Buffer): MadeCredential {
  const hash = HASHES.get(ek.nameAlg);
  if (!hash) throw new TpmWireError("unsupported EK name algorithm");
  if (ek.symmetric.algorithm !== TPM_ALG.AES || ek.symmetric.mode !== TPM_ALG.CFB) {
    throw new TpmWireError("the EK's symmetric algorithm is not AES-CFB");
  }
  const { seed, encrypted } = seedFor(ek, hash);
  const symKey = kdfa(hash.name, seed, "STORAGE", name, Buffer.alloc(0), ek.symmetric.keyBits);
  const cipher = createCipheriv(`aes-${ek.symmetric.keyBits}-cfb`, symKey, Buffer.alloc(16));
  const encIdentity = Buffer.concat([cipher.update(sized(credential)), cipher.final()]);
  const hmacKey = kdfa(hash.name, seed, "INTEGRITY", Buffer.alloc(0), Buffer.alloc(0), hash.size * 8);
  const integrity = createHmac(hash.name, hmacKey).update(encIdentity).update(name).digest();
  return {
    credentialBlob: sized(Buffer.concat([sized(integrity), encIdentity])),
    encryptedSecret: sized(encrypted),
  };
}

/** The file tpm2_activatecredential -i reads (tpm2-tools' own framing around the two TPM2Bs). */
export function tpm2ToolsCredentialFile(made: MadeCredential): Buffer {
  return Buffer.concat([u32(0xbadcc0de), u32(1), made.credentialBlob, made.encryptedSecret]);
}
