/** Helpers for the CLI peers (age, gpg, sops): run a program, temporary dirs, a throwaway PGP key. */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { peer } from "../helpers/peers.ts";

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a program to completion (no shell), with extra environment variables, and stdin. */
export function run(
  bin: string,
  args: string[],
  opts: { env?: Record<string, string | undefined>; input?: string | Buffer; cwd?: string } = {},
): RunResult {
  const r = spawnSync(bin, args, {
    env: { ...process.env, ...opts.env },
    input: opts.input ?? "",
    cwd: opts.cwd,
    encoding: "utf8",
    timeout: 60_000,
  });
  // EPIPE only means the program exited before reading all its input: its status tells why.
  if (r.error && (r.error as NodeJS.ErrnoException).code !== "EPIPE") throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Like run, but throws with the program's stderr when it exits non-zero. */
export function runOk(bin: string, args: string[], opts: Parameters<typeof run>[2] = {}): string {
  const r = run(bin, args, opts);
  if (r.status !== 0) throw new Error(`${bin} ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** A fresh temporary directory; the returned function removes it. */
export function tempDir(prefix: string): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `bootseal-${prefix}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A temporary GNUPGHOME (absolute, mode 0700) holding one new key without a passphrase
 * (ed25519 with a cv25519 encryption subkey). close() stops its gpg-agent and removes it.
 */
export function tempGnupgHome(uid: string): { home: string; fingerprint: string; close: () => void } {
  const { dir, remove } = tempDir("gnupg");
  chmodSync(dir, 0o700);
  const env = { GNUPGHOME: dir };
  const gpg = peer("GPG_BIN");
  runOk(
    gpg,
    [
      "--batch",
      "--pinentry-mode",
      "loopback",
      "--passphrase",
      "",
      "--quick-generate-key",
      uid,
      "future-default",
      "default",
      "never",
    ],
    {
      env,
    },
  );
  const colons = runOk(gpg, ["--batch", "--with-colons", "--list-secret-keys", uid], { env });
  const fpr = colons.split("\n").find((l) => l.startsWith("fpr:"));
  const fingerprint = fpr?.split(":")[9] ?? "";
  if (!/^[0-9A-F]{40}$/.test(fingerprint)) throw new Error(`no fingerprint in gpg output: ${colons}`);
  return {
    home: dir,
    fingerprint,
    close: () => {
      run(peer("GPGCONF_BIN"), ["--kill", "all"], { env });
      remove();
    },
  };
}
