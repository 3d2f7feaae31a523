/**
 * A secret sealed to one TPM, built outside it with node:crypto (TCG TPM 2.0 Part 1 §23.3
 * "Duplication", as tpm2_duplicate and go-tpm-tools' server.CreateImportBlob do): a sealed
 * data object (KEYEDHASH, no sign/decrypt) holding the secret, its sensitive part under the
 * EK's outer wrapper (tpm-outer-wrap.ts, seed labelled "DUPLICATE"), ready for TPM2_Import
 * under that EK. The object's authPolicy is a PolicyPCR digest over the expected sha256 PCR
 * values, or empty with userWithAuth (no PCR policy). Only the TPM holding the EK's private
 * key can recover the seed; only in the PCR state the policy names can it unseal.
 * The EK arrives as its public key (PEM or DER SubjectPublicKeyInfo, what cloud APIs hand out)
 * and is taken with the TCG's default EK template (EK Credential Profile §B.3.3 L-1 RSA 2048,
 * §B.3.4 L-2 ECC P-256): the one `tpm2_createek -G rsa|ecc` recreates on the machine.
 */
import { createHash, type KeyObject, randomBytes } from "node:crypto";
import { outerWrap, u32 } from "./tpm-outer-wrap.ts";
import { parsePublic, Reader, sized, TPM_ALG, TPMA, type TpmPublic, TpmWireError } from "./tpm-wire.ts";

const TPM_ALG_KEYEDHASH = 0x0008;
const TPM_CC_POLICY_PCR = 0x0000017f;
/** PolicySecret(TPM_RH_ENDORSEMENT): the default EK templates' authPolicy. */
const EK_POLICY = Buffer.from("837197674484b3f81a90cc8d46a5d724fd52d76e06520b64f2a1da1b331469aa", "hex");
/** fixedTPM, fixedParent, sensitiveDataOrigin, adminWithPolicy, restricted, decrypt. */
const EK_ATTRIBUTES = 0x000300b2;
/** The highest PCR index of a PC client TPM. */
export const MAX_PCR = 23;

const u16 = (n: number): Buffer => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
};

/** The EK of the default template with this public key (RSA 2048 or ECC P-256). */
export function defaultTemplateEk(key: KeyObject): TpmPublic {
  const jwk = key.export({ format: "jwk" });
  const head = Buffer.concat([u16(TPM_ALG.SHA256), u32(EK_ATTRIBUTES), sized(EK_POLICY)]);
  const aes128cfb = Buffer.concat([u16(TPM_ALG.AES), u16(128), u16(TPM_ALG.CFB)]);
  if (key.asymmetricKeyType === "rsa" && jwk.e === "AQAB") {
    const n = Buffer.from(jwk.n as string, "base64url");
    if (n.length !== 256) throw new TpmWireError("an RSA EK must be 2048 bits (the default EK template)");
    return parsePublic(
      Buffer.concat([u16(TPM_ALG.RSA), head, aes128cfb, u16(TPM_ALG.NULL), u16(2048), u32(0), sized(n)]),
    );
  }
  if (key.asymmetricKeyType === "ec" && jwk.crv === "P-256") {
    const x = Buffer.from(jwk.x as string, "base64url");
    const y = Buffer.from(jwk.y as string, "base64url");
    return parsePublic(
      Buffer.concat([
        u16(TPM_ALG.ECC),
        head,
        aes128cfb,
        u16(TPM_ALG.NULL),
        u16(0x0003),
        u16(TPM_ALG.NULL),
        sized(x),
        sized(y),
      ]),
    );
  }
  throw new TpmWireError("the EK must be RSA 2048 (exponent 65537) or ECC P-256 (the default EK templates)");
}

/** TPML_PCR_SELECTION of one sha256 bank. */
function pcrSelection(pcrs: readonly number[]): Buffer {
  const bitmap = Buffer.alloc(3);
  for (const pcr of pcrs) bitmap[pcr >> 3] = (bitmap[pcr >> 3] as number) | (1 << (pcr & 7));
  return Buffer.concat([u32(1), u16(TPM_ALG.SHA256), Buffer.from([3]), bitmap]);
}

/**
 * The policy digest of TPM2_PolicyPCR over these sha256 PCRs having these values (Part 3
 * §23.7): H(0…0 ‖ TPM_CC_PolicyPCR ‖ selection ‖ H(the values in index order)).
 */
export function pcrPolicyDigest(values: ReadonlyMap<number, Buffer>): Buffer {
  const pcrs = [...values.keys()].sort((a, b) => a - b);
  const pcrDigest = createHash("sha256")
    .update(Buffer.concat(pcrs.map((p) => values.get(p) as Buffer)))
    .digest();
  return createHash("sha256")
    .update(Buffer.concat([Buffer.alloc(32), u32(TPM_CC_POLICY_PCR), pcrSelection(pcrs), pcrDigest]))
    .digest();
}

/**
 * The TPM2B_PUBLIC ‖ TPM2B_PRIVATE (the duplicate) ‖ TPM2B_ENCRYPTED_SECRET (the seed) that
 * seal `secret` (at most 128 bytes, MAX_SYM_DATA) to `ek`; `authPolicy` empty for no policy.
 */
export function sealToEk(ek: TpmPublic, secret: Buffer, authPolicy: Buffer): Buffer {
  // The obfuscation value: `unique` is its hash with the data, so it hides short secrets.
  const obfuscation = randomBytes(32);
  const attributes = authPolicy.length === 0 ? TPMA.userWithAuth : 0;
  const unique = createHash("sha256").update(obfuscation).update(secret).digest();
  const objectPublic = Buffer.concat([
    u16(TPM_ALG_KEYEDHASH),
    u16(TPM_ALG.SHA256),
    u32(attributes),
    sized(authPolicy),
    u16(TPM_ALG.NULL), // TPMT_KEYEDHASH_SCHEME: none, a sealed data object
    sized(unique),
  ]);
  // TPMT_SENSITIVE: type, authValue (empty), seedValue, TPM2B_SENSITIVE_DATA.
  const sensitive = Buffer.concat([
    u16(TPM_ALG_KEYEDHASH),
    sized(Buffer.alloc(0)),
    sized(obfuscation),
    sized(secret),
  ]);
  const name = Buffer.concat([u16(TPM_ALG.SHA256), createHash("sha256").update(objectPublic).digest()]);
  const { wrapped, encryptedSeed } = outerWrap(ek, "DUPLICATE", name, sized(sensitive));
  return Buffer.concat([sized(objectPublic), wrapped, encryptedSeed]);
}

/** The three files tpm2_import reads (-u, -i, -s), from a sealToEk blob. */
export function splitSealedBlob(blob: Buffer): { public: Buffer; duplicate: Buffer; seed: Buffer } {
  const r = new Reader(blob);
  const parts = [r.sized(), r.sized(), r.sized()].map(sized) as [Buffer, Buffer, Buffer];
  r.end("sealed blob");
  return { public: parts[0], duplicate: parts[1], seed: parts[2] };
}
