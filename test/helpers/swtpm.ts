/**
 * Driving the swtpm peer's TPMs from tests with tpm2-tools (`tpm2`, `pcrValues`), and the lock
 * around them. The swtpm peer's two TPMs are shared by every test file that drives them, and the test runner
 * runs two files at once: one file extending a PCR, or flushing transient objects, while
 * another quotes or unseals would fail the other at random. A file holds this lock (`flock` on
 * a file named after the peer's TCTI) while it uses the TPMs; `release` lets the next one in.
 */
import { execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { peer } from "./peers.ts";

const run = promisify(execFile);

/** A tpm2-tools command (`args[0]` is the tool) against the TPM at `tcti`; its stdout. */
export async function tpm2(tcti: string, args: string[], cwd?: string): Promise<string> {
  const { stdout } = await run(args[0] as string, args.slice(1), {
    env: { ...process.env, TPM2TOOLS_TCTI: tcti },
    ...(cwd ? { cwd } : {}),
  });
  return stdout;
}

/** The sha256-bank values of `pcrs` as tpm2_pcrread prints them (lower-case hex by PCR number). */
export async function pcrValues(tcti: string, pcrs: readonly number[]): Promise<Record<string, string>> {
  const out = await tpm2(tcti, ["tpm2_pcrread", `sha256:${pcrs.join(",")}`]);
  const values: Record<string, string> = {};
  for (const m of out.matchAll(/^\s*(\d+)\s*:\s*0x([0-9A-Fa-f]{64})/gm))
    values[m[1] as string] = (m[2] as string).toLowerCase();
  if (pcrs.some((p) => values[p] === undefined)) throw new Error(`tpm2_pcrread: ${out}`);
  return values;
}

/** Waits for the TPMs (at most 10 minutes), then answers the function that releases them. */
export async function lockSwtpm(): Promise<() => Promise<void>> {
  const name = createHash("sha256").update(peer("SWTPM_TCTI")).digest("hex").slice(0, 16);
  const file = join(tmpdir(), `bootseal-swtpm-${name}.lock`);
  // flock holds the lock for as long as `cat` runs: until its stdin is closed.
  const holder = spawn("flock", ["--wait", "600", file, "sh", "-c", "echo locked && exec cat"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const closed = new Promise<number | null>((r) => holder.once("close", (code) => r(code)));
  await new Promise<void>((resolve, reject) => {
    holder.stdout.once("data", () => resolve());
    holder.once("close", (code) => reject(new Error(`flock ${file} exited ${code} before locking`)));
  });
  return async () => {
    holder.stdin.end();
    await closed;
  };
}
