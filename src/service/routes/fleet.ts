/**
 * The fleet page (docs/api.md "The fleet page"): GET / is the page, GET /ui/<name> its script
 * and style sheet, embedded in the program (fleet-page/assets.generated.ts, built by
 * scripts/fleet-page.ts). Anonymous: the page holds no data; it signs in to the API from the
 * browser with a controller token. Asset names carry a content hash and are cached for a
 * year; the page itself is revalidated by its ETag. Every answer here carries the page policy
 * (PAGE_CSP: same origin only, nothing inline) instead of the API's `default-src 'none'`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { FLEET_ASSETS, FLEET_PAGE, type FleetAsset } from "../fleet-page/assets.generated.ts";
import { errorReply } from "../plugins/error-handler.ts";
import { pageRouteConfig } from "../plugins/http-edge.ts";

const IMMUTABLE = "public, max-age=31536000, immutable";

function send(request: FastifyRequest, reply: FastifyReply, asset: FleetAsset, cache: string) {
  reply.header("etag", asset.etag).header("cache-control", cache);
  const match = request.headers["if-none-match"];
  if (match?.split(",").some((t) => t.trim() === asset.etag || t.trim() === "*")) {
    return reply.code(304).send();
  }
  return reply.type(asset.type).send(asset.body);
}

export function fleetRoutes(app: FastifyInstance): void {
  const config = pageRouteConfig();
  app.get("/", { schema: { hide: true }, config }, async (request, reply) =>
    send(request, reply, FLEET_PAGE, "no-cache"),
  );
  app.get<{ Params: { asset: string } }>(
    "/ui/:asset",
    { schema: { hide: true }, config },
    async (request, reply) => {
      const asset = Object.hasOwn(FLEET_ASSETS, request.params.asset)
        ? FLEET_ASSETS[request.params.asset]
        : undefined;
      if (!asset) return errorReply(reply, 404, { code: "NOT_FOUND", message: "no such asset" });
      return send(request, reply, asset, IMMUTABLE);
    },
  );
}
