/**
 * A machine's bootstrap phases: reported by the machine (its token checked by the auth
 * plugin), read by controllers. With one-time fetch `after-success`, the secret is not kept
 * once the machine says it is bootstrapped.
 */
import { BootsealError } from "../../errors.ts";
import { formatMachineId, type MachineId } from "../../machine/machine-id.ts";
import type { ServiceContext } from "../context.ts";
import type { MACHINE_PHASES, StatusEntry, StatusRecord, Versioned } from "../machine-store.ts";
import type { TokenRecord } from "../tokens.ts";

export interface PhaseReport {
  readonly phase: (typeof MACHINE_PHASES)[number];
  readonly message?: string;
  readonly attempt?: number;
  readonly exitCode?: number;
  readonly output?: string;
}

/** The reporting machine: its checked token, and the status record that check read. */
export interface Reporter {
  readonly token: TokenRecord;
  readonly seen: Versioned<StatusRecord> | null;
}

export async function reportPhase(
  ctx: ServiceContext,
  m: MachineId,
  report: PhaseReport,
  reporter: Reporter,
): Promise<StatusRecord> {
  const { machines } = ctx;
  const now = ctx.now();
  const { phase, ...details } = report;
  const entry: Omit<StatusEntry, "version"> = { phase, at: now.toISOString(), by: "machine", ...details };
  const record = await machines.recordPhase(m, {
    entry,
    tokenSha256: reporter.token.sha256,
    seen: reporter.seen ?? undefined,
  });
  ctx.metrics.statusPosts.inc({ phase: report.phase });
  ctx.events.publish({ ...m, phase: report.phase, version: record.version, at: record.updatedAt });
  if (report.phase === "succeeded" && ctx.oneTimeFetch === "after-success") {
    // The token is retired, not deleted: `bootseal fetch --one-time` still sends its DELETE.
    if (await machines.deleteConfigRetireToken(m)) await machines.recordDeleted(m, now);
  }
  return record;
}

export async function readStatus(
  ctx: ServiceContext,
  m: MachineId,
  signal: AbortSignal,
): Promise<StatusRecord> {
  const stored = await ctx.machines.readStatus(m, { signal });
  if (!stored) throw new BootsealError("NOT_FOUND", `no status for ${formatMachineId(m)}`);
  // The token mirror is the service's own business, not the controller's.
  const { token: _mirror, ...record } = stored.value;
  return record;
}
