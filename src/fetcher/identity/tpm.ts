/**
 * The `tpm` login method, machine side: the TPM answers the service's challenge through
 * tpm2-tools (tpm2_createek, tpm2_createak, tpm2_activatecredential, tpm2_quote). Why the
 * tools and not the TPM command wire format by hand: activating a credential needs a policy
 * session on the endorsement hierarchy (TPM2_StartAuthSession, TPM2_PolicySecret) and
 * parameter encryption is advisable on a bus; tpm2-tools does all of it, is packaged on
 * every distribution, and reaches any TPM through a TCTI (providers/keys/tpm2-tools.ts).
 *
 * Environment: BOOTSEAL_TPM_TCTI (the TCTI; default device:/dev/tpmrm0) and
 * BOOTSEAL_TPM_EVENT_LOG (the measured-boot event log sent when the challenge asks for it;
 * default the kernel's /sys/kernel/security/tpm0/binary_bios_measurements).
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { TPM_DEFAULT_TCTI, withTpm2Tools } from "../../../providers/keys/tpm2-tools.ts";
import { BootsealError } from "../../errors.ts";
import {
  TPM_EVENT_LOG_MAX_BYTES,
  type TpmChallengeRequest,
  type TpmLoginCredential,
} from "../../machine/identity-login.ts";
import type { CredentialContext, IdentityProvider } from "./provider.ts";

/** Where Linux exposes the firmware's TCG event log. */
export const KERNEL_EVENT_LOG = "/sys/kernel/security/tpm0/binary_bios_measurements";

/** The TCG's NV index of the RSA 2048 EK certificate (EK Credential Profile §2.2.1.4). */
const RSA_EK_CERT_NV_INDEX = "0x1c00002";

/** The DER certificate inside an NV read: TPMs pad the index, the SEQUENCE header says the length. */
export function trimDer(bytes: Buffer): Buffer | null {
  if (bytes.length < 4 || bytes[0] !== 0x30) return null;
  const first = bytes[1] as number;
  if (first < 0x80) return bytes.subarray(0, 2 + first);
  const n = first & 0x7f;
  if (n < 1 || n > 3 || bytes.length < 2 + n) return null;
  let length = 0;
  for (let i = 0; i < n; i++) length = length * 256 + (bytes[2 + i] as number);
  const end = 2 + n + length;
  return end <= bytes.length ? bytes.subarray(0, end) : null;
}

/** The event log the binding asks for, base64; a clear error where this machine has none. */
async function eventLog(file: string | undefined): Promise<string> {
  const path = file || KERNEL_EVENT_LOG;
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch {
    throw new BootsealError(
      "UNSUPPORTED",
      `--auth tpm: the service asks for the TPM event log and ${path} cannot be read (BOOTSEAL_TPM_EVENT_LOG)`,
    );
  }
  if (bytes.length > TPM_EVENT_LOG_MAX_BYTES)
    throw new BootsealError(
      "UNSUPPORTED",
      `--auth tpm: the TPM event log ${path} is longer than ${TPM_EVENT_LOG_MAX_BYTES} bytes`,
    );
  return bytes.toString("base64");
}

export function tpmProvider(): IdentityProvider {
  return {
    method: "tpm",
    async credential(ctx: CredentialContext): Promise<string> {
      const askChallenge = ctx.challenge;
      if (!askChallenge) throw new BootsealError("UNSUPPORTED", "--auth tpm needs the login challenge");
      const tcti = ctx.env.BOOTSEAL_TPM_TCTI || TPM_DEFAULT_TCTI;
      const session = { tcti, who: "--auth tpm", path: ctx.env.PATH, signal: ctx.signal };
      return withTpm2Tools(session, async (tool, dir) => {
        const flushed = async (name: string, args: readonly string[]): Promise<void> => {
          await tool(name, args);
          await tool("tpm2_flushcontext", ["-t"]);
        };
        const b64 = async (file: string): Promise<string> =>
          (await readFile(join(dir, file))).toString("base64");
        await tool("tpm2_flushcontext", ["-t"]);
        await flushed("tpm2_createek", ["-c", "ek.ctx", "-G", "rsa", "-u", "ek.pub"]);
        await flushed("tpm2_createak", [
          ...["-C", "ek.ctx", "-c", "ak.ctx", "-G", "rsa", "-g", "sha256", "-s", "rsassa"],
          ...["-u", "ak.pub", "-n", "ak.name"],
        ]);
        const request: { -readonly [K in keyof TpmChallengeRequest]: TpmChallengeRequest[K] } = {
          ekPublic: await b64("ek.pub"),
          akPublic: await b64("ak.pub"),
        };
        try {
          await tool("tpm2_nvread", [RSA_EK_CERT_NV_INDEX, "-o", "ek.crt"]);
          const der = trimDer(await readFile(join(dir, "ek.crt")));
          if (der) request.ekCertificate = der.toString("base64");
        } catch {
          // No EK certificate in this TPM: the EK must be enrolled by its hash.
        }
        const challenge = await askChallenge(request);
        // tpm2_activatecredential's input: its magic and version around the two TPM2Bs.
        const header = Buffer.from([0xba, 0xdc, 0xc0, 0xde, 0, 0, 0, 1]);
        const blob = Buffer.from(challenge.credentialBlob, "base64");
        const seed = Buffer.from(challenge.encryptedSecret, "base64");
        await writeFile(join(dir, "credential.in"), Buffer.concat([header, blob, seed]));
        await tool("tpm2_startauthsession", ["--policy-session", "-S", "session.ctx"]);
        try {
          await tool("tpm2_policysecret", ["-S", "session.ctx", "-c", "e"]);
          await tool("tpm2_activatecredential", [
            ...["-c", "ak.ctx", "-C", "ek.ctx", "-i", "credential.in", "-o", "secret.out"],
            "-P",
            "session:session.ctx",
          ]);
        } finally {
          await tool("tpm2_flushcontext", ["session.ctx"]).catch(() => undefined);
          await tool("tpm2_flushcontext", ["-t"]).catch(() => undefined);
        }
        const nonceHex = Buffer.from(challenge.nonce, "base64url").toString("hex");
        await flushed("tpm2_quote", [
          ...["-c", "ak.ctx", "-l", `sha256:${challenge.pcrs.join(",")}`, "-q", nonceHex],
          ...["-m", "quote.msg", "-s", "quote.sig", "-g", "sha256", "-o", "pcrs.out", "-F", "values"],
        ]);
        const answer: TpmLoginCredential = {
          nonce: challenge.nonce,
          secret: await b64("secret.out"),
          attest: await b64("quote.msg"),
          signature: await b64("quote.sig"),
          pcrValues: await b64("pcrs.out"),
          ...(challenge.eventLog ? { eventLog: await eventLog(ctx.env.BOOTSEAL_TPM_EVENT_LOG) } : {}),
        };
        return Buffer.from(JSON.stringify(answer), "utf8").toString("base64");
      });
    },
  };
}
