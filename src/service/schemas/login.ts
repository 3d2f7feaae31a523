/** Schemas of the machine login route (docs/api.md "Machine login"). */
import { CLOUD_AUTH_METHODS } from "../../machine/identity-login.ts";
import { errorResponses, machineParams } from "./common.ts";

/**
 * Largest credential: a signed STS request with a session token is about 3 KiB of base64; a
 * tpm login with its measured-boot event log (at most 256 KiB) is the largest.
 */
export const CREDENTIAL_MAX_CHARS = 384 * 1024;
export const LOGIN_BODY_LIMIT = CREDENTIAL_MAX_CHARS + 1024;

export const loginBody = {
  type: "object",
  properties: {
    method: { type: "string", enum: CLOUD_AUTH_METHODS, description: "the cloud identity" },
    credential: {
      type: "string",
      minLength: 1,
      maxLength: CREDENTIAL_MAX_CHARS,
      description:
        "aws-iam: base64 of the JSON {method, url, headers, body} of a signed sts:GetCallerIdentity request; " +
        "gcp, azure: the identity token (a JWT); " +
        "tpm: base64 of the JSON {nonce, secret, attest, signature} answering a challenge (…/login/challenge)",
    },
  },
  required: ["method", "credential"],
  additionalProperties: false,
} as const;

export const loginResponse = {
  type: "object",
  properties: {
    token: { type: "string", description: "a bootstrap token for this machine and this boot" },
    expiresAt: { type: "string", format: "date-time" },
  },
  required: ["token", "expiresAt"],
} as const;

export const loginSchema = {
  summary: "A machine logs in with its cloud identity",
  description:
    "No bearer token: the body's credential proves the caller's cloud identity, and machineAuth.bindings " +
    "must let that identity act for this machine (else 403). Answers a fresh bootstrap token for this " +
    "machine (machineAuth.tokenTtl, bootstrapToken.uses); the previous one stops working. " +
    "401 for a credential that does not verify, 503 KEY_UNAVAILABLE when the issuer (STS) cannot be reached.",
  operationId: "loginMachine",
  tags: ["machines"],
  // No bearer token: the body's credential is the authentication.
  security: [],
  params: machineParams,
  body: loginBody,
  response: { 200: loginResponse, ...errorResponses(400, 401, 403, 404, 413, 415, 429, 501, 503) },
} as const;

const base64 = (description: string, maxLength: number) =>
  ({ type: "string", maxLength, pattern: "^[A-Za-z0-9+/]*={0,2}$", description }) as const;

export const tpmChallengeSchema = {
  summary: "A machine asks for a TPM login challenge",
  description:
    "The first step of a tpm login: the machine's EK (and its certificate), and an AK made under it. The EK must " +
    "chain to machineAuth.tpm.ekCaFile or be enrolled by a binding, the AK must be a restricted signing key fixed " +
    "to its TPM, and a tpm binding must cover the machine. Answers a single-use nonce, the PCRs to quote and a " +
    "credential for TPM2_ActivateCredential. Refusals name the failed check: `tpm login refused (<reason>)`.",
  operationId: "tpmLoginChallenge",
  tags: ["machines"],
  security: [],
  params: machineParams,
  body: {
    type: "object",
    properties: {
      ekPublic: base64("the EK, TPM2B_PUBLIC", 2048),
      ekCertificate: base64("the EK certificate, DER", 8192),
      akPublic: base64("the AK (made under the EK), TPM2B_PUBLIC", 2048),
    },
    required: ["ekPublic", "akPublic"],
    additionalProperties: false,
  },
  response: {
    200: {
      type: "object",
      properties: {
        nonce: { type: "string", description: "base64url; the quote's qualifying data; single use" },
        pcrs: { type: "array", items: { type: "integer" }, description: "sha256-bank PCRs to quote" },
        eventLog: { type: "boolean", description: "true: send the measured-boot event log with the login" },
        credentialBlob: { type: "string", description: "TPM2B_ID_OBJECT, base64" },
        encryptedSecret: { type: "string", description: "TPM2B_ENCRYPTED_SECRET, base64" },
        expiresAt: { type: "string", format: "date-time" },
      },
      required: ["nonce", "pcrs", "credentialBlob", "encryptedSecret", "expiresAt"],
    },
    ...errorResponses(400, 401, 403, 413, 415, 429, 501),
  },
} as const;
