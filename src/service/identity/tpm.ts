/**
 * The `tpm` login method, service side (docs/api.md "Machine login", docs/security.md). Two
 * steps. The challenge: the machine sends its endorsement key (EK), its EK certificate, and an
 * attestation key (AK); the service trusts the EK (its certificate chains to
 * machineAuth.tpm.ekCaFile, or a binding enrols its hash), checks that the AK is a restricted
 * signing key fixed to its TPM, picks the binding that covers the machine, and answers a
 * single-use nonce and a credential only that EK's TPM can activate, and only for that AK
 * (tpm-credential.ts). The login: the activated secret (so the AK lives beside the EK) and a
 * TPM2_Quote by the AK over the nonce and the binding's PCRs, whose digest must be the
 * binding's expected values; a binding with `eventLog` takes some PCRs' values from replaying
 * the machine's measured-boot log (tpm-event-log.ts) instead, once every event in them is on
 * its allowlist. Every refusal names the check that failed (TPM_REFUSALS).
 */
import { createHash, randomBytes, timingSafeEqual, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  objectName,
  parsePublic,
  parseQuote,
  publicKeySha256,
  signatureVerifies,
  TPM_ALG,
  TPMA,
  type TpmPublic,
  TpmWireError,
} from "../../../providers/keys/tpm-wire.ts";
import type { MachineAuthConfig, MachineBinding } from "../../config/machine-auth.ts";
import { BootsealError, type ErrorCode } from "../../errors.ts";
import type {
  TpmChallengeRequest,
  TpmChallengeResponse,
  TpmLoginCredential,
} from "../../machine/identity-login.ts";
import { formatMachineId, type MachineId } from "../../machine/machine-id.ts";
import { allowedBinding } from "./bindings.ts";
import { makeCredential } from "./tpm-credential.ts";
import { EventLogError, replayEventLog } from "./tpm-event-log.ts";
import type { IdentityVerifier, ProvenIdentity, VerifyContext } from "./verifier.ts";

/** The reason codes a refusal carries, one per check, in the order they run. */
export const TPM_REFUSALS = [
  "malformed", // a structure does not parse
  "ek-not-endorsement-key", // the EK is not a restricted decryption key fixed to its TPM
  "ek-certificate-mismatch", // the EK certificate certifies another key
  "ek-untrusted", // no certificate chain to the EK CAs, and no binding enrols the EK
  "ak-attributes", // the AK is not a restricted signing key fixed to its TPM
  "not-bound", // no tpm binding covers this machine for this EK
  "nonce-unknown", // never issued, already used (single use), or for another machine
  "nonce-expired",
  "credential-not-activated", // the secret is wrong: the AK is not in the EK's TPM
  "quote-signature", // the quote is not the AK's (another TPM's)
  "quote-nonce", // the quote is over another nonce
  "pcr-selection", // the quote covers other PCRs than the binding names
  "event-log-missing", // the binding replays an event log and none was sent
  "event-log-malformed", // the event log does not parse (not a crypto-agile TCG log)
  "event-log-digest", // an event in a replayed PCR is not on the binding's allowlist
  "pcr-values", // the PCR values sent are not the ones the quote covers
  "event-log-replay", // the log's replay is not what the TPM quoted: the log is not this boot's
  "pcr-mismatch", // the PCR values differ from the binding's
] as const;
export type TpmRefusal = (typeof TPM_REFUSALS)[number];

function refuse(reason: TpmRefusal, message: string, code: ErrorCode = "UNAUTHORIZED"): BootsealError {
  return new BootsealError(code, `tpm login refused (${reason}): ${message}`);
}

/** Outstanding challenges at most; past it, expired ones are dropped, else new ones refused. */
const MAX_OUTSTANDING = 4096;
const SECRET_BYTES = 32;
const NONCE_BYTES = 32;

interface Challenge {
  readonly machine: string;
  readonly expiresAt: number;
  readonly secret: Buffer;
  readonly ak: TpmPublic;
  readonly binding: MachineBinding;
  readonly identity: ProvenIdentity;
}

export interface TpmVerifier extends IdentityVerifier {
  challenge(m: MachineId, request: TpmChallengeRequest, now: Date): TpmChallengeResponse;
}

function decode(field: string, value: string | undefined): Buffer {
  if (value === undefined || !/^[A-Za-z0-9+/]*={0,2}$/.test(value))
    throw refuse("malformed", `${field} is not base64`);
  return Buffer.from(value, "base64");
}

function parseKey(field: string, value: string): TpmPublic {
  try {
    return parsePublic(decode(field, value));
  } catch (err) {
    if (err instanceof TpmWireError) throw refuse("malformed", `${field}: ${err.message}`);
    throw err;
  }
}

const has = (attributes: number, bit: number): boolean => (attributes & bit) !== 0;

function checkEk(ek: TpmPublic): void {
  const a = ek.attributes;
  if (!has(a, TPMA.fixedTPM) || !has(a, TPMA.restricted) || !has(a, TPMA.decrypt) || has(a, TPMA.sign)) {
    throw refuse("ek-not-endorsement-key", "the EK is not a restricted decryption key fixed to its TPM");
  }
}

function checkAk(ak: TpmPublic): void {
  const a = ak.attributes;
  const fixed = has(a, TPMA.fixedTPM) && has(a, TPMA.fixedParent) && has(a, TPMA.sensitiveDataOrigin);
  // restricted + sign: the TPM signs with it only digests it made itself (quotes), never a forged TPMS_ATTEST.
  if (!fixed || !has(a, TPMA.restricted) || !has(a, TPMA.sign) || has(a, TPMA.decrypt)) {
    throw refuse("ak-attributes", "the AK is not a restricted signing key generated in and fixed to its TPM");
  }
}

/** The EK CAs: the certificates of machineAuth.tpm.ekCaFile. */
function loadCas(file: string | undefined): X509Certificate[] {
  if (file === undefined) return [];
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    throw new BootsealError("USAGE", `machineAuth.tpm.ekCaFile: cannot read ${file}`);
  }
  const pems = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (pems.length === 0)
    throw new BootsealError("USAGE", `machineAuth.tpm.ekCaFile: no certificate in ${file}`);
  return pems.map((pem) => new X509Certificate(pem));
}

/**
 * The issuer of an EK certificate that chains to one of `cas` (each CA is a trust anchor;
 * intermediates must be in the bundle), valid now; null when it does not chain.
 */
function certifiedBy(cert: X509Certificate, cas: readonly X509Certificate[], now: Date): string | null {
  const valid = (c: X509Certificate) => new Date(c.validFrom) <= now && now <= new Date(c.validTo);
  let current = cert;
  for (let depth = 0; depth < 8; depth++) {
    if (!valid(current)) return null;
    const issuer = cas.find((ca) => current.checkIssued(ca) && current.verify(ca.publicKey) && valid(ca));
    if (!issuer) return null;
    if (issuer.checkIssued(issuer)) return cert.issuer.replace(/\n/g, ", ");
    current = issuer;
  }
  return null;
}

/** The PCRs a binding has quoted: its fixed ones and those its event log replays, ascending. */
function quotedPcrs(binding: MachineBinding): number[] {
  const fixed = Object.keys(binding.pcrs ?? {}).map(Number);
  return [...new Set([...fixed, ...(binding.eventLog?.pcrs ?? [])])].sort((a, b) => a - b);
}

/** The value a PCR has before anything is extended into it (as the event log replay starts). */
const initialPcr = (index: number): string => (index >= 17 && index <= 22 ? "ff" : "00").repeat(32);

/**
 * The values the quote must show: the binding's fixed ones and, with `eventLog`, the replay of
 * the machine's log for the others, once every event in those PCRs is allowed.
 */
function expectedPcrs(binding: MachineBinding, eventLog: string | undefined): Map<number, string> {
  const expected = new Map<number, string>(
    Object.entries(binding.pcrs ?? {}).map(([i, v]) => [Number(i), v] as [number, string]),
  );
  const policy = binding.eventLog;
  if (!policy) return expected;
  if (typeof eventLog !== "string" || eventLog === "")
    throw refuse("event-log-missing", `the binding replays PCRs ${policy.pcrs.join(",")} from the event log`);
  let replay: ReturnType<typeof replayEventLog>;
  try {
    replay = replayEventLog(Buffer.from(eventLog, "base64"));
  } catch (err) {
    if (err instanceof EventLogError) throw refuse("event-log-malformed", err.message);
    throw err;
  }
  for (const [n, event] of replay.events.entries()) {
    if (policy.pcrs.includes(event.pcr) && !policy.allowedDigests.has(event.sha256)) {
      throw refuse(
        "event-log-digest",
        `event ${n + 1} in PCR ${event.pcr} (type 0x${event.type.toString(16)}) has digest ${event.sha256}, not in eventLog.allowedDigests`,
      );
    }
  }
  for (const i of policy.pcrs) expected.set(i, replay.pcrs.get(i) ?? initialPcr(i));
  return expected;
}

/** The composite digest of PCR values (sha256 of them in ascending index order). */
function compositeDigest(values: ReadonlyMap<number, string>): Buffer {
  const hash = createHash("sha256");
  for (const i of [...values.keys()].sort((a, b) => a - b))
    hash.update(Buffer.from(values.get(i) as string, "hex"));
  return hash.digest();
}

/**
 * Why the quote's digest is not the expected one: with the machine's own PCR values (checked
 * against the quote first), the first PCR that differs and where its expected value came from.
 */
function pcrRefusal(
  binding: MachineBinding,
  expected: ReadonlyMap<number, string>,
  quoted: Buffer,
  sent: string | undefined,
): BootsealError {
  const indices = [...expected.keys()].sort((a, b) => a - b);
  if (typeof sent === "string" && sent !== "") {
    const values = Buffer.from(sent, "base64");
    if (values.length !== 32 * indices.length || !createHash("sha256").update(values).digest().equals(quoted))
      return refuse("pcr-values", "the PCR values sent are not the ones the TPM quoted");
    for (const [k, i] of indices.entries()) {
      const actual = values.subarray(32 * k, 32 * (k + 1)).toString("hex");
      if (actual === expected.get(i)) continue;
      return binding.eventLog?.pcrs.includes(i)
        ? refuse(
            "event-log-replay",
            `PCR ${i} is ${actual} in the TPM, ${expected.get(i)} by the event log: the log is not this boot's`,
          )
        : refuse("pcr-mismatch", `PCR ${i} is ${actual}, the binding expects ${expected.get(i)}`);
    }
  }
  return refuse("pcr-mismatch", `PCRs ${indices.join(",")} differ from the binding's values`);
}

export function tpmVerifier(config: MachineAuthConfig): TpmVerifier {
  const cas = loadCas(config.tpm.ekCaFile);
  const ttlMs = config.tpm.challengeTtlMs;
  const outstanding = new Map<string, Challenge>();

  function admit(nonce: string, challenge: Challenge, now: number): void {
    if (outstanding.size >= MAX_OUTSTANDING) {
      for (const [k, c] of outstanding) if (c.expiresAt <= now) outstanding.delete(k);
    }
    if (outstanding.size >= MAX_OUTSTANDING) {
      throw new BootsealError("RATE_LIMITED", "too many outstanding tpm login challenges; retry later");
    }
    outstanding.set(nonce, challenge);
  }

  return {
    method: "tpm",
    challenge(m: MachineId, request: TpmChallengeRequest, now: Date): TpmChallengeResponse {
      const ek = parseKey("ekPublic", request.ekPublic);
      const ak = parseKey("akPublic", request.akPublic);
      checkEk(ek);
      const ekPublicSha256 = publicKeySha256(ek.key);
      let ekCertIssuer: string | null = null;
      if (request.ekCertificate !== undefined) {
        let cert: X509Certificate;
        try {
          cert = new X509Certificate(decode("ekCertificate", request.ekCertificate));
        } catch (err) {
          if (err instanceof BootsealError) throw err;
          throw refuse("malformed", "ekCertificate is not an X.509 certificate (DER)");
        }
        if (publicKeySha256(cert.publicKey) !== ekPublicSha256) {
          throw refuse("ek-certificate-mismatch", "the EK certificate is for another key");
        }
        ekCertIssuer = certifiedBy(cert, cas, now);
      }
      const enrolled = config.bindings.some(
        (b) => b.method === "tpm" && b.match.ekPublicSha256 === ekPublicSha256,
      );
      if (ekCertIssuer === null && !enrolled) {
        throw refuse(
          "ek-untrusted",
          `EK sha256:${ekPublicSha256} has no certificate chaining to machineAuth.tpm.ekCaFile and no binding enrols it`,
        );
      }
      checkAk(ak);
      const identity: ProvenIdentity = {
        method: "tpm",
        principal: `ek:sha256:${ekPublicSha256}`,
        attributes: { ekPublicSha256, ...(ekCertIssuer !== null ? { ekCertIssuer } : {}) },
      };
      const binding = allowedBinding(config.bindings, identity, m);
      if (!binding || quotedPcrs(binding).length === 0) {
        throw refuse(
          "not-bound",
          `${identity.principal} is not bound to machine ${formatMachineId(m)}`,
          "FORBIDDEN",
        );
      }
      const secret = randomBytes(SECRET_BYTES);
      const made = makeCredential(ek, secret, objectName(ak));
      const nonce = randomBytes(NONCE_BYTES).toString("base64url");
      const expiresAt = now.getTime() + ttlMs;
      admit(nonce, { machine: formatMachineId(m), expiresAt, secret, ak, binding, identity }, now.getTime());
      return {
        nonce,
        pcrs: quotedPcrs(binding),
        ...(binding.eventLog ? { eventLog: true } : {}),
        credentialBlob: made.credentialBlob.toString("base64"),
        encryptedSecret: made.encryptedSecret.toString("base64"),
        expiresAt: new Date(expiresAt).toISOString(),
      };
    },

    async verify(credential: string, ctx: VerifyContext): Promise<ProvenIdentity> {
      let parsed: Partial<TpmLoginCredential>;
      try {
        parsed = JSON.parse(
          Buffer.from(credential, "base64").toString("utf8"),
        ) as Partial<TpmLoginCredential>;
      } catch {
        throw refuse("malformed", "the credential is not base64 JSON");
      }
      const nonce = typeof parsed.nonce === "string" ? parsed.nonce : "";
      const challenge = outstanding.get(nonce);
      // Single use: a nonce is spent by its first login, whatever the outcome.
      outstanding.delete(nonce);
      if (!challenge || (ctx.machine !== undefined && formatMachineId(ctx.machine) !== challenge.machine)) {
        throw refuse("nonce-unknown", "the nonce was not issued for this machine or was used already");
      }
      if (ctx.now.getTime() >= challenge.expiresAt)
        throw refuse("nonce-expired", "the challenge has expired");
      const secret = decode("secret", parsed.secret);
      if (secret.length !== challenge.secret.length || !timingSafeEqual(secret, challenge.secret)) {
        throw refuse(
          "credential-not-activated",
          "the credential was not activated by the EK's TPM for this AK",
        );
      }
      const attest = decode("attest", parsed.attest);
      const signature = decode("signature", parsed.signature);
      let quote: ReturnType<typeof parseQuote>;
      let signed: boolean;
      try {
        quote = parseQuote(attest);
        signed = signatureVerifies(signature, attest, challenge.ak.key);
      } catch (err) {
        if (err instanceof TpmWireError) throw refuse("malformed", `quote: ${err.message}`);
        throw err;
      }
      if (!signed) throw refuse("quote-signature", "the quote is not signed by the attested AK");
      if (!quote.extraData.equals(Buffer.from(nonce, "base64url"))) {
        throw refuse("quote-nonce", "the quote is not over this challenge's nonce");
      }
      const indices = quotedPcrs(challenge.binding);
      const selection = quote.selections;
      if (
        selection.length !== 1 ||
        selection[0]?.hash !== TPM_ALG.SHA256 ||
        selection[0].pcrs.join(",") !== indices.join(",")
      ) {
        throw refuse("pcr-selection", `the quote must cover sha256 PCRs ${indices.join(",")}`);
      }
      const expected = expectedPcrs(challenge.binding, parsed.eventLog);
      if (!quote.pcrDigest.equals(compositeDigest(expected))) {
        throw pcrRefusal(challenge.binding, expected, quote.pcrDigest, parsed.pcrValues);
      }
      return challenge.identity;
    },
  };
}
