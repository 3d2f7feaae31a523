/**
 * /docs: the OpenAPI 3 document @fastify/swagger builds from the route schemas, as JSON
 * (/docs/openapi.json) and YAML (/docs/openapi.yaml), and Swagger UI at /docs, served from
 * @fastify/swagger-ui's own files (no CDN) under the CSP `DOCS_CSP` (plugins/http-edge.ts).
 *
 * Where those files are not on disk (the single executable: its code is bundled, its
 * node_modules are not there), /docs is a plain page listing the routes with the links to the
 * two documents instead.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import swaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance } from "fastify";
import { runningPackageRoot } from "../../config/package-root.ts";
import { DOCS_CSP } from "../plugins/http-edge.ts";

type Spec = {
  info?: { title?: string; version?: string };
  paths?: Record<string, Record<string, { summary?: string }>>;
};

/** Swagger UI's top-bar logo: ours, inline (the package's default is read from its files and links out). */
const LOGO = {
  type: "image/svg+xml",
  content: Buffer.from(
    '<svg xmlns="http://www.w3.org/2000/svg" width="160" height="40"><text x="0" y="28" ' +
      'font-family="sans-serif" font-size="26" fill="#fff">bootseal</text></svg>',
  ),
  href: "/docs",
  target: "_self",
} as const;

const escapeHtml = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The directory of Swagger UI's files, as the package resolves its dependency; undefined in
 * the single executable (no package there, no node_modules).
 */
export function swaggerUiFiles(): string | undefined {
  const root = runningPackageRoot();
  if (root === undefined) return undefined;
  try {
    const require = createRequire(join(root, "package.json"));
    const dir = join(dirname(require.resolve("@fastify/swagger-ui")), "static");
    return existsSync(join(dir, "swagger-ui-bundle.js")) ? dir : undefined;
  } catch {
    return undefined;
  }
}

export function docsRoutes(app: FastifyInstance, options: { readonly ui?: boolean } = {}): void {
  const swagger = () => (app as unknown as { swagger(o?: { yaml?: boolean }): unknown }).swagger;
  app.get("/docs/openapi.json", { schema: { hide: true } }, async () => swagger()());
  app.get("/docs/openapi.yaml", { schema: { hide: true } }, async (_request, reply) =>
    reply.type("application/yaml").send(swagger()({ yaml: true })),
  );
  if (options.ui !== false && swaggerUiFiles() !== undefined) {
    void app.register(swaggerUi, {
      routePrefix: "/docs",
      logo: LOGO,
      staticCSP: DOCS_CSP,
      theme: { title: "bootseal API" },
      uiConfig: { deepLinking: true, displayOperationId: true, tryItOutEnabled: false },
    });
    return;
  }
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
