/**
 * tpm2-tools as the machine's TPM client: one scratch directory, one TCTI, each tool's
 * failure as one line. Shared by the `tpm` login (src/fetcher/identity/tpm.ts) and configs
 * sealed to a TPM (tpm-sealed-unseal.ts). The TCTI is `device:/dev/tpmrm0` (the kernel's
 * resource manager, the default) or `swtpm:host=…,port=…` (a software TPM, the tests).
 * Without a resource manager (swtpm's socket) transient objects stay loaded between tools:
 * callers flush them (a no-op behind /dev/tpmrm0, which flushes per connection).
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { BootsealError } from "../../src/errors.ts";

const run = promisify(execFile);
export const TPM_DEFAULT_TCTI = "device:/dev/tpmrm0";

/** Runs one tool in the scratch directory. */
export type Tpm2Tool = (name: string, args: readonly string[]) => Promise<void>;

export interface Tpm2Session {
  readonly tcti: string;
  /** `who` names the feature in error texts ("--auth tpm", "tpm key"). */
  readonly who: string;
  readonly path: string | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** Runs `work` with a fresh scratch directory (removed afterwards) and its tool runner. */
export async function withTpm2Tools<T>(
  s: Tpm2Session,
  work: (tool: Tpm2Tool, dir: string) => Promise<T>,
): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), "bootseal-tpm-"));
  const tool: Tpm2Tool = async (name, args) => {
    try {
      await run(name, args, {
        cwd: dir,
        env: { PATH: s.path ?? "/usr/bin:/bin", TPM2TOOLS_TCTI: s.tcti },
        ...(s.signal ? { signal: s.signal } : {}),
      });
    } catch (err) {
      const e = err as { code?: unknown; stderr?: string };
      if (e.code === "ENOENT") {
        throw new BootsealError("UNSUPPORTED", `${s.who} needs tpm2-tools (${name} is not on PATH)`);
      }
      // The tool's own summary ("ERROR: Eys_Load(0x902) - …") over the TSS's trace lines.
      const lines = (e.stderr ?? "").split("\n");
      const why =
        lines.find((l) => l.startsWith("ERROR: ")) ?? lines.find((l) => l.startsWith("ERROR")) ?? "failed";
      throw new BootsealError("KEY_UNAVAILABLE", `TPM (${s.tcti}): ${name}: ${why.slice(0, 200)}`, {
        cause: err,
      });
    }
  };
  try {
    return await work(tool, dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
