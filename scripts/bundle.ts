/**
 * `npm run build`: bundles the CLI with esbuild into dist/cli/ (ES modules, code splitting so
 * that each command's code loads only when it runs). A bundle starts several times faster
 * than hundreds of separate modules: module resolution dominated `bootseal decrypt` of a small
 * file (docs/benchmarks.md). Cloud SDKs, Fastify and pino stay external: they load from
 * node_modules, and only when a command needs them. The fleet page's assets are rebuilt first
 * (scripts/fleet-page.ts), so the bundle always carries the page of the browser sources.
 */
import { rmSync } from "node:fs";
import { build } from "esbuild";
import { writeFleetPage } from "./fleet-page.ts";

const EXTERNAL = [
  "@aws-sdk/*",
  "@smithy/*",
  "@google-cloud/*",
  "@azure/*",
  "@grpc/*",
  "google-gax",
  "fastify",
  "@fastify/*",
  "pino",
  "prom-client",
];

await writeFleetPage();
rmSync("dist", { recursive: true, force: true });
await build({
  entryPoints: ["src/cli/main.ts"],
  outdir: "dist/cli",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node22",
  external: EXTERNAL,
  // Bundled CommonJS dependencies call require() for Node built-ins; ESM has none.
  banner: {
    js: "import { createRequire as __bootsealCreateRequire } from 'node:module'; const require = __bootsealCreateRequire(import.meta.url);",
  },
  chunkNames: "chunks/[name]-[hash]",
  logLevel: "warning",
});
