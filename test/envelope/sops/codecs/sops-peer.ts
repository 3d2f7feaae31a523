/**
 * The real sops 3.13.2 as an oracle for the codecs' tests: two fresh age identities in a temp
 * dir, and a runner that encrypts and decrypts with them (the cwd matters: sops looks for
 * .sops.yaml upwards). A missing peer fails loudly
 * (peer() throws), it never skips.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { env } from "node:process";
import { peer } from "../../../helpers/peers.ts";

export interface SopsPeer {
  readonly dir: string;
  readonly recipients: readonly [string, string];
  /** Run sops; throws (with its stderr) on a non-zero exit. */
  run(args: readonly string[], options?: { cwd?: string; input?: Uint8Array }): Buffer;
  /** Encrypt `plain` as `type` to the first recipient; sops' output bytes. */
  encrypt(plain: Uint8Array, type: string, extraArgs?: readonly string[]): Uint8Array;
  /** Decrypt sops' own output back, as `type`. */
  decrypt(encrypted: Uint8Array, type: string): Uint8Array;
  /** Run sops expecting failure: its exit status and stderr. */
  fail(args: readonly string[], options?: { cwd?: string }): { status: number | null; stderr: string };
  /** A directory whose .sops.yaml puts each recipient in its own key group, threshold 2. */
  groupsDir(): string;
  cleanup(): void;
}

export function startSopsPeer(): SopsPeer {
  const sops = peer("SOPS_BIN");
  const keygen = peer("AGE_KEYGEN_BIN");
  const dir = mkdtempSync(join(tmpdir(), "bootseal-flat-"));
  const recipients: string[] = [];
  let identities = "";
  for (const name of ["a", "b"]) {
    const file = join(dir, `${name}.agekey`);
    execFileSync(keygen, ["-o", file], { stdio: "pipe" });
    const text = readFileSync(file, "utf8");
    const recipient = /^# public key: (age1\S+)$/m.exec(text)?.[1];
    if (!recipient) throw new Error(`age-keygen wrote no public key in ${file}`);
    recipients.push(recipient);
    identities += text;
  }
  const keyFile = join(dir, "identities.agekey");
  writeFileSync(keyFile, identities);
  const childEnv = { ...env, SOPS_AGE_KEY_FILE: keyFile };
  const run = (args: readonly string[], options: { cwd?: string; input?: Uint8Array } = {}): Buffer => {
    const result = spawnSync(sops, args, {
      cwd: options.cwd ?? dir,
      env: childEnv,
      input: options.input,
      maxBuffer: 64 * 1024 * 1024,
    });
    if (result.status !== 0) {
      throw new Error(`sops ${args.join(" ")} exited ${result.status}: ${result.stderr?.toString()}`);
    }
    return result.stdout;
  };
  let n = 0;
  /** Runs sops on `input` written to a fresh file in the temp dir. */
  const onFile = (args: readonly string[], input: Uint8Array): Uint8Array => {
    const file = join(dir, `in-${n++}`);
    writeFileSync(file, input);
    return new Uint8Array(run([...args, file]));
  };

  return {
    dir,
    recipients: [recipients[0] as string, recipients[1] as string],
    run,
    encrypt: (plain, type, extraArgs = []) =>
      onFile(
        [
          "encrypt",
          ...extraArgs,
          "--age",
          recipients[0] as string,
          "--input-type",
          type,
          "--output-type",
          type,
        ],
        plain,
      ),
    decrypt: (encrypted, type) => onFile(["decrypt", "--input-type", type, "--output-type", type], encrypted),
    fail(args, options = {}) {
      const result = spawnSync(sops, args, { cwd: options.cwd ?? dir, env: childEnv });
      return { status: result.status, stderr: result.stderr.toString() };
    },
    groupsDir() {
      const groups = mkdtempSync(join(dir, "groups-"));
      // The CLI puts all --age recipients in one group; two groups need a creation rule.
      const rule = [
        "creation_rules:",
        "  - shamir_threshold: 2",
        "    key_groups:",
        ...recipients.flatMap((r) => ["      - age:", `          - ${r}`]),
        "",
      ].join("\n");
      writeFileSync(join(groups, ".sops.yaml"), rule);
      return groups;
    },
    cleanup() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
