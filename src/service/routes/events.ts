/**
 * GET /v1/events: server-sent events of the status changes made through this replica
 * (events-bus.ts). `Last-Event-ID` replays what the ring buffer still holds after that id;
 * comment lines are sent as heartbeats so proxies keep the stream open. Streams are closed
 * when the server shuts down (preClose), so a graceful close is not held up by them.
 */
import type { ServerResponse } from "node:http";
import type { FastifyInstance } from "fastify";
import type { ServiceContext } from "../context.ts";
import type { StatusEvent } from "../events-bus.ts";
import { mayList } from "../request-state.ts";
import { eventsSchema } from "../schemas/status.ts";
import type { RequestTypeProvider } from "../schemas/type-provider.ts";

function frame(event: StatusEvent): string {
  const { id, ...data } = event;
  return `id: ${id}\nevent: status\ndata: ${JSON.stringify(data)}\n\n`;
}

export function eventsRoutes(parent: FastifyInstance, ctx: ServiceContext): void {
  const app = parent.withTypeProvider<RequestTypeProvider>();
  const open = new Set<ServerResponse>();
  app.addHook("preClose", async () => {
    for (const res of open) res.end();
    open.clear();
  });

  app.get(
    "/v1/events",
    { schema: eventsSchema, config: { auth: { scopes: ["status:read"] } } },
    (request, reply) => {
      const { namespace } = request.query;
      const lastHeader = request.headers["last-event-id"];
      const lastId = Number(Array.isArray(lastHeader) ? lastHeader[0] : lastHeader);
      const wanted = (e: StatusEvent) =>
        (!namespace || e.namespace === namespace) && mayList(request, e.namespace);
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
        connection: "keep-alive",
        "x-accel-buffering": "no",
      });
      res.write(`retry: 2000\n: connected\n\n`);
      open.add(res);
      if (Number.isSafeInteger(lastId)) {
        for (const e of ctx.events.since(lastId)) if (wanted(e)) res.write(frame(e));
      }
      const unsubscribe = ctx.events.subscribe((e) => {
        if (wanted(e)) res.write(frame(e));
      });
      const heartbeat = setInterval(() => res.write(`: heartbeat ${Date.now()}\n\n`), ctx.heartbeatMs);
      heartbeat.unref();
      res.on("close", () => {
        clearInterval(heartbeat);
        unsubscribe();
        open.delete(res);
      });
    },
  );
}
