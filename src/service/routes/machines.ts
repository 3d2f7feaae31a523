/**
 * GET /v1/machines?namespace=&phase=&limit=&after=: machines and their current phase, read
 * from the status records in store order. `after` is the last `<ns>/<name>` of the previous
 * page; the store listing is walked from the start and skipped up to it (the ObjectStore
 * interface hides paging), then status records are read a few at a time.
 */
import type { FastifyInstance } from "fastify";
import type { ServiceContext } from "../context.ts";
import type { StatusRecord } from "../machine-store.ts";
import type { MachineRef } from "../names.ts";
import { signalFor } from "../plugins/auth.ts";
import { listSchema } from "../schemas/status.ts";

const READ_CONCURRENCY = 8;

type ListQuery = { namespace?: string; phase?: string; limit?: number; after?: string };

export function machinesRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.get(
    "/v1/machines",
    { schema: listSchema, config: { auth: { scope: "status:read" } } },
    async (request, reply) => {
      const q = request.query as ListQuery;
      const limit = q.limit ?? 100;
      const signal = signalFor(reply);
      const items: ReturnType<typeof summary>[] = [];
      // Cursor comparison on the store key, which is the order the listing comes in.
      const afterKey = q.after ? `status/${q.after}.json` : undefined;
      let batch: MachineRef[] = [];
      let more = false;

      const flush = async (): Promise<void> => {
        const records = await Promise.all(batch.map((m) => ctx.machines.readStatus(m, { signal })));
        batch = [];
        for (const r of records) {
          if (!r || (q.phase && r.phase !== q.phase)) continue;
          if (items.length < limit) items.push(summary(r));
          else more = true;
        }
      };

      for await (const m of ctx.machines.listMachines(q.namespace, { signal })) {
        if (afterKey && `status/${m.namespace}/${m.name}.json` <= afterKey) continue;
        if (items.length >= limit) {
          more = true;
          break;
        }
        batch.push(m);
        if (batch.length >= READ_CONCURRENCY) await flush();
      }
      await flush();
      const next = more && items.length > 0 ? itemId(items[items.length - 1]!) : undefined;
      return { items, ...(next ? { next } : {}) };
    },
  );
}

function itemId(item: { namespace: string; name: string }): string {
  return `${item.namespace}/${item.name}`;
}

function summary(r: StatusRecord) {
  return {
    namespace: r.namespace,
    name: r.name,
    phase: r.phase,
    version: r.version,
    updatedAt: r.updatedAt,
    published: r.config !== null,
  };
}
