/**
 * The machine list: status records in store order, filtered by namespace and phase, one page
 * at a time. `after` is the last `<ns>/<name>` of the previous page; the store listing is
 * walked from the start and skipped up to it (the ObjectStore interface hides paging), then
 * status records are read a few at a time.
 */
import { type BootSummary, bootSummary } from "../../machine/boot-summary.ts";
import { formatMachineId, type MachineId } from "../../machine/machine-id.ts";
import type { Phase } from "../../machine/status-protocol.ts";
import type { ServiceContext } from "../context.ts";
import type { CapiRef, StatusRecord } from "../status-record.ts";

const READ_CONCURRENCY = 8;

export interface ListQuery {
  readonly namespace?: string | undefined;
  readonly phase?: Phase | undefined;
  readonly limit: number;
  readonly after?: string | undefined;
  /** The namespaces the caller may see (its policies); absent: all. */
  readonly visible?: (namespace: string) => boolean;
}

/** A machine in the list: its record's head and its current boot (../../machine/boot-summary.ts). */
export interface MachineSummary extends BootSummary {
  readonly namespace: string;
  readonly name: string;
  readonly phase: Phase;
  readonly version: number;
  readonly updatedAt: string;
  readonly published: boolean;
  /** The Cluster API objects its config was published for, when the publisher named them. */
  readonly capi?: CapiRef;
}

export interface MachinePage {
  readonly items: MachineSummary[];
  /** The cursor of the next page; undefined on the last one. */
  readonly next: string | undefined;
}

export function summary(r: StatusRecord): MachineSummary {
  return {
    namespace: r.namespace,
    name: r.name,
    phase: r.phase,
    version: r.version,
    updatedAt: r.updatedAt,
    published: r.config !== null,
    ...(r.config?.capi ? { capi: r.config.capi } : {}),
    ...bootSummary(r),
  };
}

export async function listMachines(
  ctx: ServiceContext,
  q: ListQuery,
  signal: AbortSignal,
): Promise<MachinePage> {
  const items: MachineSummary[] = [];
  let batch: MachineId[] = [];
  let more = false;

  const flush = async (): Promise<void> => {
    const records = await Promise.all(
      batch.map(async (m) => (await ctx.machines.readStatus(m, { signal }))?.value),
    );
    batch = [];
    for (const r of records) {
      if (!r || (q.phase && r.phase !== q.phase)) continue;
      if (items.length < q.limit) items.push(summary(r));
      else more = true;
    }
  };

  for await (const m of ctx.machines.listMachines(q.namespace, q.after, { signal })) {
    if (items.length >= q.limit) {
      more = true;
      break;
    }
    if (q.visible && !q.visible(m.namespace)) continue;
    batch.push(m);
    if (batch.length >= READ_CONCURRENCY) await flush();
  }
  await flush();
  const last = items[items.length - 1];
  return { items, next: more && last ? formatMachineId(last) : undefined };
}
