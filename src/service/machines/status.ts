/**
 * A machine's bootstrap phases: reported by the machine (its token checked by the auth
 * plugin), read by controllers. With one-time fetch `after-success`, the secret is not kept
 * once the machine says it is bootstrapped.
 */
import { BootsealError } from "../../errors.ts";
import { formatMachineId, type MachineId } from "../../machine/machine-id.ts";
import { isTerminalPhase, type ReportedPhase } from "../../machine/status-protocol.ts";
import { quoteEtag, type ServiceContext } from "../context.ts";
import type { Versioned } from "../records.ts";
import type { Report } from "../status-coalescer.ts";
import type { StatusRecord } from "../status-record.ts";
import type { TokenRecord } from "../tokens.ts";

export interface PhaseReport {
  readonly phase: ReportedPhase;
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

/** The answer to a report: 200 once written, 202 when held. */
export interface ReportOutcome {
  readonly statusCode: 200 | 202;
  readonly phase: string;
  readonly version: number;
  readonly updatedAt: string;
}

export async function reportPhase(
  ctx: ServiceContext,
  m: MachineId,
  report: PhaseReport,
  reporter: Reporter,
): Promise<ReportOutcome> {
  const { machines, statusReports } = ctx;
  const now = ctx.now();
  const { phase, ...details } = report;
  const entry: Report = { phase, at: now.toISOString(), by: "machine", ...details };
  ctx.metrics.statusPosts.inc({ phase });
  // A phase on the way to a terminal one is held and answered 202 (status-coalescer.ts).
  if (!isTerminalPhase(phase) && statusReports.hold(m, entry, reporter.token.sha256)) {
    // The event goes out now: readers are level-triggered, it only wakes them (docs/api.md).
    const version = reporter.seen?.value.version ?? 0;
    ctx.events.publish({ ...m, phase, version, at: entry.at });
    return { statusCode: 202, phase, version, updatedAt: entry.at };
  }
  // One-time fetch `after-success` (docs/api.md "Status durability"): the config is deleted
  // BEFORE the report is written, and the report's own write records it gone. The token
  // stays (`bootseal fetch --one-time` still sends its DELETE) but can fetch nothing: it is
  // bound to the deleted config (tokens.ts `configEtag`). A failure on the way answers 5xx
  // with nothing recorded, and the machine's retry redoes it all.
  const oneTime = phase === "succeeded" && ctx.oneTimeFetch === "after-success";
  if (oneTime) {
    // The config the checked record names, and only that version: a publish since then is
    // not deleted (its new token mirror then refuses the report's write).
    const etag = reporter.seen ? (reporter.seen.value.config?.etag ?? null) : undefined;
    if (etag !== null) await machines.deleteConfig(m, etag);
  }
  const record = await statusReports.commit(
    m,
    entry,
    reporter.token.sha256,
    reporter.seen ?? undefined,
    oneTime,
  );
  ctx.metrics.observeReport(record, entry);
  ctx.events.publish({ ...m, phase, version: record.version, at: entry.at });
  return { statusCode: 200, phase: record.phase, version: record.version, updatedAt: record.updatedAt };
}

/** A machine's status record as a controller sees it, and its version (a quoted ETag). */
export async function readStatus(
  ctx: ServiceContext,
  m: MachineId,
  signal: AbortSignal,
): Promise<{ readonly record: StatusRecord; readonly etag: string }> {
  const stored = await ctx.machines.readStatus(m, { signal });
  if (!stored) throw new BootsealError("NOT_FOUND", `no status for ${formatMachineId(m)}`);
  // The token mirror is the service's own business, not the controller's.
  const { token: _mirror, ...record } = stored.value;
  return { record, etag: quoteEtag(stored.etag) };
}
