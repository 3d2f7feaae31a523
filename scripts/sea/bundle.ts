/**
 * The JavaScript inside every executable: src/cli/main.ts and its dependencies bundled by
 * esbuild into one CommonJS file (Node 24 runs only a CommonJS main script from a SEA blob,
 * and `require` there reaches built-in modules only). In memory, with esbuild's metafile
 * (the SBOM's list of bundled packages). esbuild's output is a function of its inputs and
 * options: minified, no comments, no paths of the build machine.
 */
import { build, type Metafile, type Plugin } from "esbuild";

export interface Bundle {
  code: Uint8Array;
  metafile: Metafile;
}

/**
 * A small entry calls main() itself (main.ts recognises its own entry point by file path,
 * which the bundle has not got).
 */
const ENTRY = `
import { main } from "./src/cli/main.ts";
const io = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env, cwd: process.cwd() };
main(process.argv.slice(2), io).then((code) => { process.exitCode = code; });
`;

/** `entry` and `plugins` are for bench/startup-floor.ts, which bundles a part of the CLI alone. */
export async function bundle(
  repo: string,
  version: string,
  { entry = ENTRY, plugins = [] }: { entry?: string; plugins?: Plugin[] } = {},
): Promise<Bundle> {
  const result = await build({
    stdin: { contents: entry, resolveDir: repo, sourcefile: "sea-entry.ts", loader: "ts" },
    absWorkingDir: repo,
    bundle: true,
    platform: "node",
    target: "node24",
    format: "cjs",
    minify: true,
    keepNames: true,
    legalComments: "none",
    write: false,
    metafile: true,
    outfile: "bootseal.cjs",
    logLevel: "error",
    // import() in a SEA main script has no module loader behind it: turn every dynamic
    // import, built-in modules included, into require().
    supported: { "dynamic-import": false },
    // The CommonJS output has no import.meta, and the executable no package around it:
    // src/config/package-root.ts then has no package root, and takes the version baked in
    // here (`bootseal --version`, the metrics' build info).
    define: { "import.meta.url": "undefined", BOOTSEAL_SEA_VERSION: JSON.stringify(version) },
    plugins,
  });
  for (const w of result.warnings) console.warn(`esbuild: ${w.text}`);
  const out = result.outputFiles[0];
  if (out === undefined || result.outputFiles.length !== 1) throw new Error("esbuild gave no single output");
  return { code: out.contents, metafile: result.metafile };
}
