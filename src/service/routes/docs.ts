/**
 * /docs: the OpenAPI 3 document @fastify/swagger builds from the route schemas, as JSON
 * (/docs/openapi.json) and YAML (/docs/openapi.yaml), and a minimal page listing the routes.
 */
import type { FastifyInstance } from "fastify";

type Spec = {
  info?: { title?: string; version?: string };
  paths?: Record<string, Record<string, { summary?: string }>>;
};

const escapeHtml = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

export function docsRoutes(app: FastifyInstance): void {
  const swagger = () => (app as unknown as { swagger(o?: { yaml?: boolean }): unknown }).swagger;
  app.get("/docs/openapi.json", { schema: { hide: true } }, async () => swagger()());
  app.get("/docs/openapi.yaml", { schema: { hide: true } }, async (_request, reply) =>
    reply.type("application/yaml").send(swagger()({ yaml: true })),
  );
  app.get("/docs", { schema: { hide: true } }, async (_request, reply) => {
    const spec = swagger()() as Spec;
    const rows: string[] = [];
    for (const [path, ops] of Object.entries(spec.paths ?? {})) {
      for (const [method, op] of Object.entries(ops)) {
        rows.push(
          `<tr><td>${method.toUpperCase()}</td><td><code>${escapeHtml(path)}</code></td><td>${escapeHtml(op.summary ?? "")}</td></tr>`,
        );
      }
    }
    const html =
      `<!doctype html><html><head><meta charset="utf-8"><title>bootseal API</title></head><body>` +
      `<h1>${escapeHtml(spec.info?.title ?? "bootseal")} ${escapeHtml(spec.info?.version ?? "")}</h1>` +
      `<p>OpenAPI 3: <a href="/docs/openapi.json">openapi.json</a>, <a href="/docs/openapi.yaml">openapi.yaml</a></p>` +
      `<table><tr><th>method</th><th>path</th><th>summary</th></tr>${rows.join("")}</table></body></html>`;
    return reply.type("text/html; charset=utf-8").send(html);
  });
}
