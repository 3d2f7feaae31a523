/**
 * `npm run build`: bundles the CLI with esbuild into dist/cli/ (ES modules, code splitting so
 * that each command's code loads only when it runs). A bundle starts several times faster
 * than hundreds of separate modules: module resolution dominated `bootseal decrypt` of a small
 * file (docs/benchmarks.md). Cloud SDKs, Fastify and pino stay external: they load from
 * node_modules, and only when a command needs them. package.json's bin, dist/cli/main.js, is
 * a small separate file (src/cli/bin.ts) that checks the Node version, then loads the bundle.
 * The fleet page's assets are rebuilt first (scripts/fleet-page.ts), so the bundle always
 * carries the page of the browser sources.
 */
import { chmodSync, rmSync } from "node:fs";
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
// The CLI itself: dist/cli/bootseal.js and its chunks.
await build({
  entryPoints: [{ in: "src/cli/main.ts", out: "bootseal" }],
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
// The bin entry, dist/cli/main.js: the Node version check (src/cli/bin.ts), in syntax an old
// Node parses (Node 14's, so Node 20 prints the one-line message instead of a SyntaxError),
// then an import() of ./bootseal.js.
// The shebang: npm links the bin as an executable, so `npx bootseal` and a global install run
// this file directly (without it the shell tries to run the JavaScript).
await build({
  entryPoints: ["src/cli/bin.ts"],
  outfile: "dist/cli/main.js",
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node14",
  banner: { js: "#!/usr/bin/env node" },
  logLevel: "warning",
});
chmodSync("dist/cli/main.js", 0o755);
