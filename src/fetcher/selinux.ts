/**
 * SELinux labels for files the fetcher writes. A temporary file created in /etc gets the
 * label the policy's type transition gives it, which is not always the label the target
 * should carry (e.g. a file in /etc/kubernetes/pki); so before the rename the temporary
 * file takes the label of the file it replaces, or of the target directory when it is new:
 * `chcon --reference=REF TMP`, or where coreutils lacks SELinux support, the
 * `security.selinux` extended attribute copied with getfattr/setfattr.
 *
 * SELinux counts as enabled when selinuxfs is mounted (/sys/fs/selinux/enforce exists), the
 * test libselinux's is_selinux_enabled() makes. Labelling failures are failures: a file with
 * the wrong label breaks the service that reads it later, far from the cause.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { BootsealError } from "../errors.ts";

export interface SelinuxLabeler {
  /** Gives `file` the SELinux context of `reference`. */
  label(file: string, reference: string): Promise<void>;
}

export function selinuxEnabled(probe: string = "/sys/fs/selinux/enforce"): boolean {
  return existsSync(probe);
}

/** Runs a program without a shell; resolves to its stdout. Injectable for tests. */
export type Runner = (file: string, args: readonly string[]) => Promise<string>;

export const execRunner: Runner = (file, args) =>
  new Promise((resolve, reject) => {
    execFile(file, [...args], { encoding: "utf8", timeout: 10_000 }, (err, stdout) =>
      err ? reject(err) : resolve(stdout),
    );
  });

function isMissingProgram(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | null)?.code === "ENOENT";
}

/** chcon --reference, else getfattr/setfattr on security.selinux. */
export function commandLabeler(run: Runner = execRunner): SelinuxLabeler {
  return {
    async label(file, reference) {
      try {
        await run("chcon", [`--reference=${reference}`, "--", file]);
        return;
      } catch (err) {
        if (!isMissingProgram(err)) {
          throw new BootsealError("IO_ERROR", `cannot set the SELinux label of ${file} (chcon failed)`, {
            cause: err,
          });
        }
      }
      try {
        const context = (await run("getfattr", ["--only-values", "-n", "security.selinux", "--", reference]))
          .replace(/\0/g, "")
          .trim();
        if (context === "") throw new Error("empty context");
        await run("setfattr", ["-n", "security.selinux", "-v", context, "--", file]);
      } catch (err) {
        throw new BootsealError(
          "IO_ERROR",
          `cannot set the SELinux label of ${file} (no chcon; getfattr/setfattr failed)`,
          { cause: err },
        );
      }
    },
  };
}

/** The labeler to use here: the commands where SELinux is enabled, none otherwise. */
export function defaultLabeler(): SelinuxLabeler | null {
  return selinuxEnabled() ? commandLabeler() : null;
}
