/**
 * node:fs without an ESM import: an ESM import of node:fs evaluates every lazy getter of the
 * module (fs.promises, the streams, …), a few milliseconds of start-up for every command
 * (docs/benchmarks.md). For the code every CLI start runs (src/cli/main.ts, the package's
 * version in src/config/package-root.ts). process.getBuiltinModule is Node 22.3+; before it,
 * a require. Called lazily: import.meta.url is empty in the CommonJS single-executable bundle,
 * which always has process.getBuiltinModule.
 */
import { createRequire } from "node:module";

export function nodeFs(): typeof import("node:fs") {
  return process.getBuiltinModule?.("node:fs") ?? createRequire(import.meta.url)("node:fs");
}
