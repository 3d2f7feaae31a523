/**
 * Where the running code's package is, and every default derived from it: the one place that
 * turns a module's location into a path (docs/architecture.md). The package root is the
 * nearest directory above a module that holds a package.json: the same from the source tree
 * (src/config/), the bundle (dist/cli/, and its code-split chunks one level deeper) and an npm
 * install (node_modules/bootseal/dist/…), so a default does not depend on which file the code
 * ended up in.
 *
 * The single executable has no package: its CommonJS bundle has no import.meta.url
 * (scripts/sea/bundle.ts defines it as undefined), so there is no root and no package.json;
 * the executable's own directory takes the root's place for the artifacts (the release's
 * executables sit side by side there).
 */
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { nodeFs } from "../files/node-fs.ts";

/** The nearest directory above the module at `moduleUrl` with a package.json; undefined without one (or a URL). */
export function packageRoot(moduleUrl: string | undefined): string | undefined {
  if (moduleUrl === undefined) return undefined;
  const { existsSync } = nodeFs();
  let dir = dirname(fileURLToPath(moduleUrl));
  for (;;) {
    if (existsSync(join(dir, "package.json"))) return dir;
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/** The running code's module URL: undefined in the single executable. */
function thisModuleUrl(): string | undefined {
  return import.meta.url;
}

/** The running code's package root (src/, dist/ or an npm install); undefined in the single executable. */
export function runningPackageRoot(): string | undefined {
  return packageRoot(thisModuleUrl());
}

/** The single executable's version: scripts/sea/bundle.ts defines it; undeclared anywhere else. */
declare const BOOTSEAL_SEA_VERSION: string | undefined;

/**
 * The package's version from its package.json (`bootseal --version`, the metrics' build
 * info); in the single executable, the version baked into it; "unknown" without either.
 */
export function packageVersion(root: string | undefined = runningPackageRoot()): string {
  if (root === undefined) return typeof BOOTSEAL_SEA_VERSION === "string" ? BOOTSEAL_SEA_VERSION : "unknown";
  try {
    const pkg = JSON.parse(nodeFs().readFileSync(join(root, "package.json"), "utf8")) as {
      version?: unknown;
    };
    return typeof pkg.version === "string" ? pkg.version : "unknown";
  } catch {
    return "unknown";
  }
}

/**
 * The default `artifacts.dir`: the package's `sea/`, where `npm run build:sea` writes the
 * executables in a checkout; in the single executable, the directory the executable is in.
 * An npm install has no `sea/` (the package carries no executables): the service then serves
 * none until the operator puts them there or sets `artifacts.dir` (docs/releases.md).
 */
export function defaultArtifactsDir(root: string | undefined = runningPackageRoot()): string {
  return root === undefined ? dirname(resolve(process.execPath)) : join(root, "sea");
}
