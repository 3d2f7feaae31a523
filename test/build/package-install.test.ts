/**
 * The npm package works as a package: `npm pack` of this tree (its `prepare` builds dist/),
 * installed from the tarball globally into an empty prefix and into a fresh project, runs
 * `bootseal --version`, `--help` and a real command from each with the pinned Node 24 first on
 * PATH (a global install: `bootseal serve`, whose default artifacts directory is the installed
 * package's `sea/`, which it says has no executables; the project: `npx bootseal` encrypt and
 * decrypt round trip), and under the machine's Node 20 prints the one line and exits 1. Dependencies
 * come from the npm registry through ~/.npm (`--prefer-offline`: about 15 s once cached).
 *
 * The pack runs in a staging copy of the checkout (package.json, README.md and deploy/ copied,
 * every other entry a symbolic link, no dist/), so `prepare` (`npm run build`) writes the
 * staging dist/ and never removes the checkout's under another test that runs it.
 */
import assert from "node:assert/strict";
import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { ageKey, REPO, tempDir } from "../fetcher/helpers.ts";
import { oldNode } from "../helpers/old-node.ts";
import { startServeCommand } from "../helpers/serve-process.ts";
import { until } from "../helpers/until.ts";

const NODE24_DIR = dirname(process.execPath);
const VERSION = (JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string }).version;
/** What package.json's `files` lets into the package, besides package.json and README.md. */
const PACKED_DIRS = ["dist/", "deploy/"];
const NPM_FLAGS = ["--prefer-offline", "--no-audit", "--no-fund"];

let dir: { path: string; remove: () => Promise<void> };
let tarball: string;
let globalBin: string;
let project: string;

/**
 * The environment of npm and of the installed bin: no npm_* of an outer `npm test` (its
 * prefix and package would leak in), no BOOTSEAL_* settings; `nodeDir` first on PATH.
 */
function env(nodeDir: string): Record<string, string> {
  const kept = Object.entries(process.env).filter(
    ([k]) => !/^npm_/i.test(k) && !k.startsWith("BOOTSEAL_") && k !== "PATH",
  ) as [string, string][];
  return { ...Object.fromEntries(kept), PATH: `${nodeDir}:${process.env.PATH}` };
}

function sh(
  file: string,
  args: readonly string[],
  cwd: string,
  nodeDir = NODE24_DIR,
  extraEnv: Record<string, string> = {},
) {
  const r: SpawnSyncReturns<string> = spawnSync(file, args, {
    cwd,
    env: { ...env(nodeDir), ...extraEnv },
    encoding: "utf8",
    timeout: 240_000,
  });
  if (r.error) throw r.error;
  return r;
}

function ok(r: SpawnSyncReturns<string>, what: string): string {
  assert.equal(r.status, 0, `${what}: ${r.stderr}`);
  return r.stdout;
}

/** The checkout without dist/: the `files` entries and package.json copied, the rest linked. */
function stage(to: string): void {
  mkdirSync(to);
  for (const name of readdirSync(REPO)) {
    if (name === "dist" || name === ".git") continue;
    const from = join(REPO, name);
    if (name === "package.json" || name === "README.md" || name === "deploy")
      cpSync(from, join(to, name), { recursive: true });
    else symlinkSync(from, join(to, name));
  }
}

/** The paths `npm pack --dry-run --json` lists for the checkout itself. */
function packedPaths(cwd: string): string[] {
  const out = ok(sh("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], cwd), "npm pack --dry-run");
  const [entry] = JSON.parse(out) as { files: { path: string }[] }[];
  return (entry?.files ?? []).map((f) => f.path).sort();
}

function assertOnlyPackageFiles(paths: readonly string[]): void {
  for (const path of paths) {
    assert.ok(
      path === "package.json" || path === "README.md" || PACKED_DIRS.some((d) => path.startsWith(d)),
      `${path} is in the package`,
    );
  }
}

before(
  async () => {
    dir = await tempDir("package-install");
    const staged = join(dir.path, "stage");
    stage(staged);
    // A real `npm pack`: its `prepare` builds dist/ in the staging copy.
    ok(sh("npm", ["pack", "--pack-destination", dir.path], staged), "npm pack");
    tarball = join(dir.path, `bootseal-${VERSION}.tgz`);
    statSync(tarball);

    const prefix = join(dir.path, "global");
    mkdirSync(prefix);
    ok(sh("npm", ["install", "-g", "--prefix", prefix, ...NPM_FLAGS, tarball], dir.path), "npm install -g");
    globalBin = join(prefix, "bin", "bootseal");

    project = join(dir.path, "project");
    mkdirSync(project);
    ok(sh("npm", ["init", "-y"], project), "npm init");
    ok(sh("npm", ["install", ...NPM_FLAGS, tarball], project), "npm install");
  },
  { timeout: 600_000 },
);

after(() => dir?.remove());

test("the package holds dist/, deploy/, package.json and README.md only: the bin, its bundle and chunks; nothing of test/, src/, .peers, data/, sea/", () => {
  const listing = ok(sh("tar", ["-tzf", tarball], dir.path), "tar")
    .trim()
    .split("\n");
  const paths = listing.map((p) => p.replace(/^package\//, "")).filter((p) => !p.endsWith("/"));
  assertOnlyPackageFiles(paths);
  for (const need of ["dist/cli/main.js", "dist/cli/bootseal.js", "deploy/helm/bootseal/Chart.yaml"]) {
    assert.ok(paths.includes(need), `${need} is packed`);
  }
  assert.ok(
    paths.some((p) => /^dist\/cli\/chunks\/.+\.js$/.test(p)),
    "the code-split chunks are packed",
  );
  // package.json's `files` against the checkout itself, whatever it holds (test/, src/, .peers…).
  assertOnlyPackageFiles(packedPaths(REPO));
});

test("a global install from the tarball, Node 24 first on PATH: --version, --help, and serve, whose artifacts directory is the package's sea/, none there", async () => {
  assert.equal(ok(sh(globalBin, ["--version"], dir.path), "--version"), `bootseal ${VERSION}\n`);
  assert.match(ok(sh(globalBin, ["--help"], dir.path), "--help"), /^usage: bootseal <command> \[flags\]$/m);
  // The bin itself, not through npx: npx does not pass its SIGTERM on to the service.
  const service = await startServeCommand([globalBin, "serve", "--data-dir", "data"], {
    env: env(NODE24_DIR),
    cwd: dir.path,
  });
  try {
    await until("the banner's last line", () => /token key:/.test(service.log()), { tries: 300 });
    const sea = join(dir.path, "global", "lib", "node_modules", "bootseal", "sea");
    const line = service.log().match(/^ {2}artifacts: +(.*)$/m)?.[1];
    assert.ok(line?.startsWith(`${sea}: no executables, `), line);
    assert.match(line ?? "", /`npm run build:sea` in a bootseal checkout .*docs\/releases\.md\)$/);
    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    assert.ok(metrics.includes(`\nbootseal_build_info{version="${VERSION}",`), "the package's version");
    // Swagger UI's files, resolved from the installed package's dependencies.
    const ui = await fetch(`${service.url}/docs/static/swagger-ui-bundle.js`);
    assert.equal(ui.status, 200);
    assert.match(await ui.text(), /SwaggerUIBundle/);
  } finally {
    await service.stop();
  }
});

test("a fresh project with the tarball installed: npx --help, --version, and encrypt then decrypt", async () => {
  const npx = (args: string[], extraEnv: Record<string, string> = {}) =>
    sh("npx", ["--no-install", "bootseal", ...args], project, NODE24_DIR, extraEnv);
  assert.match(ok(npx(["--help"]), "npx bootseal --help"), /^usage: bootseal <command> \[flags\]$/m);
  assert.equal(ok(npx(["--version"]), "npx bootseal --version"), `bootseal ${VERSION}\n`);
  const key = await ageKey(project, "project");
  // sops writes YAML with four-space indentation: this round trips byte for byte.
  const plain = "db:\n    password: hunter2\n";
  writeFileSync(join(project, "secret.yaml"), plain);
  const doc = ok(npx(["encrypt", "--age", key.recipient, "secret.yaml"]), "npx bootseal encrypt");
  assert.match(doc, /password: ENC\[AES256_GCM,/);
  writeFileSync(join(project, "secret.enc.yaml"), doc);
  const decrypted = npx(["decrypt", "secret.enc.yaml"], { SOPS_AGE_KEY_FILE: key.file });
  assert.equal(ok(decrypted, "npx bootseal decrypt"), plain);
});

test("the machine's Node 20: the installed bin and npx print the one line and exit 1", (t) => {
  const old = oldNode();
  if (!old) {
    t.skip("no Node older than 22 on this machine (set BOOTSEAL_TEST_OLD_NODE)");
    return;
  }
  const line = `bootseal needs Node.js >= 22 (this is ${old.version})\n`;
  for (const r of [
    sh(globalBin, ["--version"], dir.path, dirname(old.path)),
    sh(globalBin, ["encrypt", "--age", "x", "secret.yaml"], project, dirname(old.path)),
    sh("npx", ["--no-install", "bootseal", "--help"], project, dirname(old.path)),
  ]) {
    assert.equal(r.status, EXIT_CODES.USAGE, r.stderr);
    assert.equal(r.stdout, "");
    assert.equal(r.stderr, line);
  }
});
