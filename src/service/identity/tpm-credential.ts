/**
 * TPM2_MakeCredential done by the service with node:crypto (TCG TPM 2.0 Part 1 §24, "Credential
 * Protection"; Part 3 MakeCredential): a secret only the TPM holding the endorsement key can
 * recover, and only for the object with the given name (TPM2_ActivateCredential checks the
 * name inside the HMAC): the TPM's outer wrapper (providers/keys/tpm-outer-wrap.ts) with the
 * seed labelled "IDENTITY" around the credential. Why hand-written: see tpm-wire.ts; tpm2_makecredential and tpm2_activatecredential check it
 * (test/service/tpm-credential.test.ts).
 */
import { outerWrap, u32 } from "../../../providers/keys/tpm-outer-wrap.ts";
import { sized, type TpmPublic } from "../../../providers/keys/tpm-wire.ts";

export interface MadeCredential {
  /** TPM2B_ID_OBJECT: the integrity HMAC and the encrypted credential. */
  readonly credentialBlob: Buffer;
  /** TPM2B_ENCRYPTED_SECRET: the seed, encrypted to the EK. */
  readonly encryptedSecret: Buffer;
}

/**
 * TPM2_MakeCredential(EK public, credential, object name). The EK must be a storage key with
 * AES-CFB as its symmetric algorithm (every EK template does).
 */
export function makeCredential(ek: TpmPublic, credential: Buffer, name: Buffer): MadeCredential {
  const { wrapped, encryptedSeed } = outerWrap(ek, "IDENTITY", name, sized(credential));
  return { credentialBlob: wrapped, encryptedSecret: encryptedSeed };
}

/** The file tpm2_activatecredential -i reads (tpm2-tools' own framing around the two TPM2Bs). */
export function tpm2ToolsCredentialFile(made: MadeCredential): Buffer {
  return Buffer.concat([u32(0xbadcc0de), u32(1), made.credentialBlob, made.encryptedSecret]);
}
