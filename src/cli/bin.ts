/**
 * The npm bin entry (package.json `bin` → dist/cli/main.js; scripts/bundle.ts builds it from
 * this file for an old Node's syntax, and the real CLI into dist/cli/bootseal.js). It checks
 * the Node version before anything else loads: an older Node would die on the bundle's syntax
 * with a raw SyntaxError stack, so this prints one line instead and exits with the usage
 * class (exit-codes.ts: USAGE). The single executable carries its own Node and bundles
 * main.ts directly (scripts/sea/bundle.ts).
 */
import { EXIT_INTERNAL, EXIT_USAGE, nodeVersionProblem } from "./node-version.ts";

const problem = nodeVersionProblem(process.versions.node);
if (problem !== null) {
  process.stderr.write(`${problem}\n`);
  process.exitCode = EXIT_USAGE;
} else {
  // A name, not a literal: the bundle beside this file at run time (tsc cannot resolve it).
  const real = "./bootseal.js";
  // V8's code cache on disk (Node 22.1+), on before the bundle loads so that its first chunks
  // are cached too: later runs skip most of their parsing and compiling.
  import("node:module")
    .then((m: { enableCompileCache?: () => unknown }) => m.enableCompileCache?.())
    .then(() => import(real))
    .then(
      (cli: { runCli: () => void }) => cli.runCli(),
      (err: unknown) => {
        process.stderr.write(`bootseal: cannot load ${real}: ${(err as Error)?.message ?? String(err)}\n`);
        process.exitCode = EXIT_INTERNAL;
      },
    );
}
