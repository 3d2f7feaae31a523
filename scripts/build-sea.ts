/**
 * `npm run build:sea`: the whole CLI as one linux-x64 executable (Node's single executable
 * applications), for machines without Node.
 *
 * 1. esbuild bundles src/cli/main.ts and every dependency into one CommonJS file: Node 24
 *    runs only a CommonJS main script from a SEA blob, and `require` there reaches built-in
 *    modules only. A small entry (below) calls main() itself, since main.ts recognises its
 *    own entry point by file path, and answers --version from the version baked in here
 *    (there is no package.json beside the executable).
 * 2. `node --experimental-sea-config` turns the bundle into a blob, with V8's code cache
 *    (useCodeCache) so start-up skips compiling the bundle.
 * 3. The pinned Node 24 binary from node_modules/node (no download) is copied and the blob
 *    injected with postject under the SEA sentinel fuse.
 * 4. sea/bootseal.sha256 is written; with --key KEY.pem (or BOOTSEAL_SIGNING_KEY) also the
 *    Ed25519 signature sea/bootseal.sig (see src/artifact/signing.ts).
 *
 * Usage: node scripts/build-sea.ts [--out DIR] [--key KEY.pem] [--no-code-cache]
 */
import { execFileSync } from "node:child_process";
import { chmod, copyFile, mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { env } from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { build } from "esbuild";
import { loadPrivateKey, sha256Hex, signArtifact } from "../src/artifact/signing.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));
const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

const { values } = parseArgs({
  options: {
    out: { type: "string" },
    key: { type: "string" },
    "no-code-cache": { type: "boolean" },
  },
});
const outDir = resolve(values.out ?? join(REPO, "sea"));
const signingKey = values.key ?? env.BOOTSEAL_SIGNING_KEY;

const pkg = JSON.parse(await readFile(join(REPO, "package.json"), "utf8")) as { version: string };
const nodeBinary = join(REPO, "node_modules/node/bin/node");
const nodeVersion = execFileSync(nodeBinary, ["--version"], { encoding: "utf8" }).trim();
if (!nodeVersion.startsWith("v24.")) throw new Error(`node_modules/node is ${nodeVersion}, expected Node 24`);
if (process.platform !== "linux" || process.arch !== "x64") {
  throw new Error(`build:sea builds linux-x64 only (this is ${process.platform}-${process.arch})`);
}

const ENTRY = `
import { main } from "./src/cli/main.ts";
const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "version")) {
  process.stdout.write(${JSON.stringify(`bootseal ${pkg.version}\n`)});
} else {
  const io = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env, cwd: process.cwd() };
  main(argv, io).then((code) => { process.exitCode = code; });
}
`;

await rm(outDir, { recursive: true, force: true });
await mkdir(outDir, { recursive: true });
const bundle = join(outDir, "bootseal.cjs");
const blob = join(outDir, "bootseal.blob");
const exe = join(outDir, "bootseal");

const t0 = performance.now();
const result = await build({
  stdin: { contents: ENTRY, resolveDir: REPO, sourcefile: "sea-entry.ts", loader: "ts" },
  bundle: true,
  platform: "node",
  target: "node24",
  format: "cjs",
  minify: true,
  keepNames: true,
  legalComments: "none",
  outfile: bundle,
  logLevel: "error",
  // import() in a SEA main script has no module loader behind it (and none at all with the
  // code cache): turn every dynamic import, built-in modules included, into require().
  supported: { "dynamic-import": false },
  // The CommonJS output has no import.meta: main.ts reads it only for --version (answered
  // above) and to recognise its own entry point (not needed: the entry calls main()).
  define: { "import.meta.url": "undefined" },
});
for (const w of result.warnings) console.warn(`esbuild: ${w.text}`);
const t1 = performance.now();

const seaConfig = join(outDir, "sea-config.json");
await writeFile(
  seaConfig,
  JSON.stringify({
    main: bundle,
    output: blob,
    disableExperimentalSEAWarning: true,
    useCodeCache: values["no-code-cache"] !== true,
  }),
);
execFileSync(nodeBinary, ["--experimental-sea-config", seaConfig], { stdio: "inherit" });
await copyFile(nodeBinary, exe);
await chmod(exe, 0o755);
const require = createRequire(import.meta.url);
const { inject } = require("postject") as {
  inject(file: string, name: string, data: Buffer, options: { sentinelFuse: string }): Promise<void>;
};
await inject(exe, "NODE_SEA_BLOB", await readFile(blob), { sentinelFuse: SEA_FUSE });
const t2 = performance.now();

const bytes = await readFile(exe);
const sha256 = sha256Hex(bytes);
await writeFile(join(outDir, "bootseal.sha256"), `${sha256}  bootseal\n`);
if (signingKey) {
  const key = loadPrivateKey(await readFile(signingKey), signingKey);
  await writeFile(join(outDir, "bootseal.sig"), signArtifact(bytes, key));
}
await rm(seaConfig);
await rm(blob);

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
console.log(
  [
    `built ${exe} (${mb((await stat(exe)).size)}; bundle ${mb((await stat(bundle)).size)}; ${nodeVersion} linux-x64)`,
    `sha256 ${sha256}`,
    signingKey ? `signature ${join(outDir, "bootseal.sig")}` : "unsigned (pass --key KEY.pem to sign)",
    `bundle ${((t1 - t0) / 1000).toFixed(1)}s, blob + inject ${((t2 - t1) / 1000).toFixed(1)}s`,
  ].join("\n"),
);
