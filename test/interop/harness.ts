/**
 * Shared set-up for the interop suites: one temp dir with a fresh age identity and a fresh
 * PGP key in a private GNUPGHOME, and helpers that run the real sops and bootseal as
 * processes with the same environment.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type ChildResult, runChild } from "../helpers/child.ts";
import { peer } from "../helpers/peers.ts";

export const BOOTSEAL_MAIN = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));

export type RunResult = ChildResult;

export interface Harness {
  readonly dir: string;
  readonly ageRecipient: string;
  readonly ageKeyFile: string;
  readonly pgpFingerprint: string;
  readonly env: NodeJS.ProcessEnv;
  sops(
    args: string[],
    opts?: { cwd?: string; input?: Uint8Array; env?: NodeJS.ProcessEnv },
  ): Promise<RunResult>;
  bootseal(
    args: string[],
    opts?: { cwd?: string; input?: Uint8Array; env?: NodeJS.ProcessEnv },
  ): Promise<RunResult>;
  cleanup(): void;
}

function run(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
  input?: Uint8Array,
): Promise<RunResult> {
  return runChild(cmd, args, { env, cwd, input });
}

export function createHarness(): Harness {
  const dir = mkdtempSync(join(tmpdir(), "bootseal-interop-"));
  const gnupgHome = join(dir, "gnupg");
  mkdirSync(gnupgHome, { mode: 0o700 });
  const ageKeyFile = join(dir, "age.txt");
  execFileSync(peer("AGE_KEYGEN_BIN"), ["-o", ageKeyFile], { stdio: "ignore" });
  const ageRecipient = /public key: (age1\w+)/.exec(readFileSync(ageKeyFile, "utf8"))?.[1];
  if (!ageRecipient) throw new Error("age-keygen wrote no public key");

  const gpg = peer("GPG_BIN");
  const gpgEnv = { ...process.env, GNUPGHOME: gnupgHome };
  execFileSync(
    gpg,
    [
      "--batch",
      "--passphrase",
      "",
      "--quick-gen-key",
      "bootseal interop <interop@bootseal.test>",
      "rsa2048",
      "default",
      "never",
    ],
    { env: gpgEnv, stdio: "ignore" },
  );
  const fpr = execFileSync(gpg, ["--batch", "--with-colons", "--list-secret-keys"], { env: gpgEnv })
    .toString()
    .split("\n")
    .find((l) => l.startsWith("fpr:"))
    ?.split(":")[9];
  if (!fpr) throw new Error("gpg made no key");
  // The subkey for encryption comes with quick-gen-key's "default" usage only for some algos: add one explicitly.
  execFileSync(gpg, ["--batch", "--passphrase", "", "--quick-add-key", fpr, "rsa2048", "encr", "never"], {
    env: gpgEnv,
    stdio: "ignore",
  });

  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: dir,
    GNUPGHOME: gnupgHome,
    SOPS_AGE_KEY_FILE: ageKeyFile,
  };
  const sopsBin = peer("SOPS_BIN");
  return {
    dir,
    ageRecipient,
    ageKeyFile,
    pgpFingerprint: fpr,
    env,
    sops: (args, opts = {}) => run(sopsBin, args, { ...env, ...opts.env }, opts.cwd ?? dir, opts.input),
    bootseal: (args, opts = {}) =>
      run(process.execPath, [BOOTSEAL_MAIN, ...args], { ...env, ...opts.env }, opts.cwd ?? dir, opts.input),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Fails with both tools' stderr when a step did not exit 0. */
export function ok(result: RunResult, what: string): Buffer {
  if (result.status !== 0) throw new Error(`${what} exited ${result.status}: ${result.stderr.trim()}`);
  return result.stdout;
}

/** Another age identity in the harness's directory, for the key-change tests (a second recipient). */
export function extraAgeKey(h: Harness, name = "age2.txt"): { recipient: string; keyFile: string } {
  const keyFile = join(h.dir, name);
  execFileSync(peer("AGE_KEYGEN_BIN"), ["-o", keyFile], { stdio: "ignore" });
  const recipient = /public key: (age1\w+)/.exec(readFileSync(keyFile, "utf8"))?.[1];
  if (!recipient) throw new Error("age-keygen wrote no public key");
  return { recipient, keyFile };
}
