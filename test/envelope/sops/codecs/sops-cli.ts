/**
 * Runs the real sops 3.13.2 for the codec cross-checks: a throwaway age key in a temporary
 * directory, encrypt and decrypt there (the cwd matters: sops looks for .sops.yaml upwards).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { peer } from "../../../helpers/peers.ts";

export interface SopsCli {
  readonly dir: string;
  readonly keyFile: string;
  readonly recipient: string;
  /** Encrypt `plain` as `type` and return sops' output bytes. */
  encrypt(plain: Uint8Array, type: "json" | "binary", extraArgs?: readonly string[]): Uint8Array;
  /** Decrypt sops' own output back, as `type`. */
  decrypt(encrypted: Uint8Array, type: "json" | "binary"): Uint8Array;
  close(): void;
}

export function startSops(): SopsCli {
  const sops = peer("SOPS_BIN");
  const dir = mkdtempSync(join(tmpdir(), "bootseal-json-codec-"));
  const keyFile = join(dir, "key.txt");
  execFileSync(peer("AGE_KEYGEN_BIN"), ["-o", keyFile], { stdio: "ignore" });
  const recipient = /age1[0-9a-z]+/.exec(readFileSync(keyFile, "utf8"))?.[0];
  if (!recipient) throw new Error("age-keygen wrote no recipient");
  const env = { ...process.env, SOPS_AGE_KEY_FILE: keyFile };
  let n = 0;
  const run = (args: string[], input: Uint8Array): Uint8Array => {
    const file = join(dir, `in-${n++}`);
    writeFileSync(file, input);
    const out = execFileSync(sops, [...args, file], { cwd: dir, env, maxBuffer: 64 << 20 });
    return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  };
  return {
    dir,
    keyFile,
    recipient,
    encrypt: (plain, type, extraArgs = []) =>
      run(["encrypt", ...extraArgs, "--age", recipient, "--input-type", type, "--output-type", type], plain),
    decrypt: (encrypted, type) => run(["decrypt", "--input-type", type, "--output-type", type], encrypted),
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}
