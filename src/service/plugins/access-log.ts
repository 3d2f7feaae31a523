/**
 * The access log: one line per answered request, at `info`, written when the response is done
 * (Fastify's own two lines per request, "incoming request" and "request completed", are off:
 * on a boot storm they were a third of the service's log volume for no extra fact). The line
 * carries the request id (shared with the audit line of the same request), method, URL path,
 * route pattern, status and duration; never headers or bodies. Security events go to the audit
 * log (plugins/audit.ts), one line each, whatever the access log's level.
 */
import type { FastifyInstance } from "fastify";
import { routeConfigOf } from "../request-state.ts";

export function accessLogPlugin(app: FastifyInstance): void {
  // A callback hook, not an async one: no promise per request (this runs for every request).
  app.addHook("onResponse", (request, reply, done) => {
    request.log.info(
      {
        method: request.method,
        url: request.url,
        route: routeConfigOf(request).url ?? "unmatched",
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
      },
      "request",
    );
    done();
  });
}
