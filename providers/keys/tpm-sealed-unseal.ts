/**
 * The machine's side of a config sealed to its TPM: tpm2-tools recreate the EK from the
 * default template, import the sealed object under it (TPM2_Import; the EK's policy is
 * PolicySecret on the endorsement hierarchy, one policy session per use), load it and unseal
 * it, with a PolicyPCR session over the sealed PCRs when there are any. The TPM refuses the
 * import on another TPM (the seed does not decrypt, the integrity check fails) and the unseal
 * in another PCR state (the policy digest differs).
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { BootsealError } from "../../src/errors.ts";
import { splitSealedBlob } from "./tpm-sealed-object.ts";
import { parsePublic, publicKeySha256 } from "./tpm-wire.ts";
import type { Tpm2Session } from "./tpm2-tools.ts";
import { withTpm2Tools } from "./tpm2-tools.ts";

export interface SealedTo {
  /** SHA-256 of the EK's SubjectPublicKeyInfo. */
  readonly ekSha256: string;
  readonly ekType: "rsa" | "ecc";
  /** The sha256 PCRs of the policy, ascending; empty: no policy. */
  readonly pcrs: readonly number[];
}

/**
 * The sealed secret, or null when this TPM's EK is not the one sealed to (another machine's
 * config: try the next key). The TPM's own refusals are KEY_UNAVAILABLE with the tool's line.
 */
export async function unsealWithTpm(
  session: Tpm2Session,
  sealed: SealedTo,
  blob: Buffer,
  options: { readonly skipEkCheck?: boolean } = {},
): Promise<Buffer | null> {
  const parts = splitSealedBlob(blob);
  return withTpm2Tools(session, async (tool, dir) => {
    // Transient objects only: saved sessions may be another process's (a shared swtpm).
    const flushAll = async () => {
      await tool("tpm2_flushcontext", ["-t"]).catch(() => undefined);
    };
    /** One use of the EK: a fresh PolicySecret(endorsement) session. */
    const withEkPolicy = async (name: string, args: readonly string[]) => {
      await tool("tpm2_startauthsession", ["--policy-session", "-S", "ek-session.ctx"]);
      try {
        await tool("tpm2_policysecret", ["-S", "ek-session.ctx", "-c", "e"]);
        await tool(name, [...args, "-P", "session:ek-session.ctx"]);
      } finally {
        await tool("tpm2_flushcontext", ["ek-session.ctx"]).catch(() => undefined);
        await flushAll();
      }
    };
    await writeFile(join(dir, "sealed.pub"), parts.public);
    await writeFile(join(dir, "sealed.dpriv"), parts.duplicate);
    await writeFile(join(dir, "sealed.seed"), parts.seed);
    try {
      await flushAll();
      await tool("tpm2_createek", ["-c", "ek.ctx", "-G", sealed.ekType, "-u", "ek.pub"]);
      await flushAll();
      const ek = parsePublic(await readFile(join(dir, "ek.pub")));
      if (!options.skipEkCheck && publicKeySha256(ek.key) !== sealed.ekSha256) return null;
      await withEkPolicy("tpm2_import", [
        ...["-C", "ek.ctx", "-u", "sealed.pub", "-i", "sealed.dpriv", "-s", "sealed.seed"],
        ...["-r", "sealed.priv"],
      ]);
      await withEkPolicy("tpm2_load", [
        "-C",
        "ek.ctx",
        "-u",
        "sealed.pub",
        "-r",
        "sealed.priv",
        "-c",
        "sealed.ctx",
      ]);
      const auth = sealed.pcrs.length > 0 ? ["-p", `pcr:sha256:${sealed.pcrs.join(",")}`] : [];
      await tool("tpm2_unseal", ["-c", "sealed.ctx", ...auth, "-o", "secret.out"]);
      return await readFile(join(dir, "secret.out"));
    } catch (err) {
      if (err instanceof BootsealError && err.code === "KEY_UNAVAILABLE") {
        throw new BootsealError(err.code, `tpm key ${sealed.ekSha256.slice(0, 16)}…: ${err.message}`, {
          cause: err,
        });
      }
      throw err;
    } finally {
      await flushAll();
    }
  });
}
