/**
 * `npm run build:sea`: the CLI as single executables (Node's single executable applications)
 * for machines without Node, byte for byte reproducible (docs/releases.md):
 *
 *   sea/bootseal-linux-x64  sea/bootseal-linux-arm64  sea/bootseal-windows-x64.exe
 *   sea/SHA256SUMS  sea/bootseal.cdx.json (CycloneDX SBOM)
 *   sea/<each of those executables and SHA256SUMS>.sig (Ed25519, with a key)
 *
 * 1. esbuild bundles src/cli/main.ts into one CommonJS file (scripts/sea/bundle.ts);
 * 2. `node --experimental-sea-config` makes one blob for all platforms, without code cache
 *    or snapshot (scripts/sea/inject.ts);
 * 3. the official Node binary of each platform, of the pinned version of node_modules/node,
 *    comes from its npm package, integrity-checked and cached outside the checkout
 *    (~/.cache/bootseal-sea, scripts/sea/node-dist.ts), and postject injects the blob into a copy;
 * 4. SHA256SUMS, signatures, the SBOM (scripts/sea/release-files.ts, scripts/sea/sbom.ts).
 *
 * Usage: node scripts/build-sea.ts [--out DIR] [--key KEY.pem] [--platform P,P]
 *          [--if-missing] [--best-effort]
 *   --key (or BOOTSEAL_SIGNING_KEY): an Ed25519 PKCS#8 PEM key (bootseal sign-artifact
 *     --generate-key); --platform: linux-x64,linux-arm64,windows-x64 (default all);
 *   --if-missing: nothing to do when DIR already holds this tree's build (the inputs digest
 *     in DIR/.build-inputs.json); --best-effort: a failure is a warning and exit 0 (the
 *     `prestart` script: `npm start` goes on without the executables).
 */
import { createHash, createPublicKey } from "node:crypto";
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { env, exit } from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadPrivateKey } from "../src/artifact/signing.ts";
import { bundle } from "./sea/bundle.ts";
import { injectBlob, makeBlob } from "./sea/inject.ts";
import { baseBinary, seaCacheDir } from "./sea/node-dist.ts";
import { PLATFORMS, selectPlatforms } from "./sea/platforms.ts";
import { inputsDigest, SBOM, STAMP, SUMS, signatures, stampHolds, sumsFile } from "./sea/release-files.ts";
import { sbom } from "./sea/sbom.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));
/** Files earlier builds wrote: removed so sea/ holds one build only. */
const LEGACY = [
  "bootseal",
  "bootseal.sha256",
  "bootseal.sig",
  "bootseal.cjs",
  "bootseal.blob",
  "sea-config.json",
];

const { values } = parseArgs({
  options: {
    out: { type: "string" },
    key: { type: "string" },
    platform: { type: "string" },
    "if-missing": { type: "boolean" },
    "best-effort": { type: "boolean" },
  },
});

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

async function run(): Promise<void> {
  const t0 = performance.now();
  const outDir = resolve(values.out ?? join(REPO, "sea"));
  const platforms = selectPlatforms(values.platform);
  const keyFile = values.key ?? env.BOOTSEAL_SIGNING_KEY;
  const key = keyFile ? loadPrivateKey(await readFile(keyFile), keyFile) : undefined;
  const pkg = JSON.parse(await readFile(join(REPO, "package.json"), "utf8")) as {
    name: string;
    version: string;
    license: string;
  };
  const nodeVersion = (
    JSON.parse(await readFile(join(REPO, "node_modules/node/package.json"), "utf8")) as { version: string }
  ).version;
  if (!nodeVersion.startsWith("24."))
    throw new Error(`node_modules/node is ${nodeVersion}, expected Node 24`);

  const signer = key
    ? createHash("sha256")
        .update(createPublicKey(key).export({ type: "spki", format: "der" }))
        .digest("hex")
    : "unsigned";
  const inputs = await inputsDigest(
    REPO,
    JSON.stringify({ platforms: platforms.map((p) => p.platform), signer, nodeVersion }),
  );
  if (values["if-missing"] && (await stampHolds(outDir, inputs))) {
    console.log(`build-sea: ${outDir} is up to date`);
    return;
  }

  await mkdir(outDir, { recursive: true });
  const scratch = await mkdtemp(join(outDir, ".build-"));
  try {
    const { code, metafile } = await bundle(REPO, pkg.version);
    const blob = await makeBlob(join(REPO, "node_modules/node/bin/node"), code, scratch);
    const t1 = performance.now();
    const cache = seaCacheDir();
    const executables: { name: string; bytes: Uint8Array }[] = [];
    const runtimes = [];
    for (const spec of platforms) {
      const base = await baseBinary(spec, nodeVersion, cache);
      const exe = join(scratch, spec.executable);
      await injectBlob(base.path, blob, exe);
      executables.push({ name: spec.executable, bytes: await readFile(exe) });
      runtimes.push({
        nodePackage: spec.nodePackage,
        version: nodeVersion,
        integrity: base.integrity,
        purl: base.purl,
      });
    }
    const lock = JSON.parse(await readFile(join(REPO, "package-lock.json"), "utf8"));
    const sbomText = sbom({
      name: pkg.name,
      version: pkg.version,
      license: pkg.license,
      metafile,
      lock,
      runtimes,
    });
    await writeFile(join(scratch, SBOM), sbomText);
    const sums = sumsFile([...executables, { name: SBOM, bytes: Buffer.from(sbomText) }]);
    await writeFile(join(scratch, SUMS), sums);
    const signed = key ? signatures([...executables, { name: SUMS, bytes: Buffer.from(sums) }], key) : [];
    for (const s of signed) await writeFile(join(scratch, s.name), s.bytes);

    // Replace the previous build's files, then the stamp last: an interrupted build is no build.
    const owned = [
      STAMP,
      SUMS,
      `${SUMS}.sig`,
      SBOM,
      ...LEGACY,
      ...PLATFORMS.flatMap((p) => [p.executable, `${p.executable}.sig`]),
    ];
    for (const name of owned) await rm(join(outDir, name), { force: true });
    const written = [...executables.map((e) => e.name), SBOM, SUMS, ...signed.map((s) => s.name)];
    const files: Record<string, number> = {};
    for (const name of written) await rename(join(scratch, name), join(outDir, name));
    for (const e of executables) files[e.name] = e.bytes.length;
    files[SBOM] = Buffer.byteLength(sbomText);
    files[SUMS] = Buffer.byteLength(sums);
    for (const s of signed) files[s.name] = s.bytes.length;
    await writeFile(join(outDir, STAMP), `${JSON.stringify({ inputs, files }, null, 2)}\n`);

    const t2 = performance.now();
    console.log(
      [
        `build-sea: ${outDir} (Node ${nodeVersion}; bundle ${mib(code.length)}, blob ${mib(blob.length)})`,
        ...executables.map((e) => `  ${e.name}  ${mib(e.bytes.length)}`),
        ...sums
          .trimEnd()
          .split("\n")
          .map((l) => `  ${l}`),
        key
          ? `  signed (${signed.length} .sig files)`
          : "  unsigned (pass --key KEY.pem or BOOTSEAL_SIGNING_KEY to sign)",
        `  bundle + blob ${((t1 - t0) / 1000).toFixed(1)}s, executables ${((t2 - t1) / 1000).toFixed(1)}s`,
      ].join("\n"),
    );
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

try {
  await run();
} catch (err) {
  const message = err instanceof Error ? err.message : String(err);
  if (values["best-effort"]) {
    console.warn(`build-sea: WARNING: no executables built: ${message.split("\n")[0]}`);
  } else {
    console.error(`build-sea: ${message.split("\n")[0]}`);
    if (env.BOOTSEAL_DEBUG === "1") console.error(err);
    exit(1);
  }
}
