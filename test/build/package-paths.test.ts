/**
 * The paths derived from the package's location (src/config/package-root.ts) resolve the same
 * from every form of the program, whatever the working directory: the sources (`node
 * src/cli/main.ts`), the dist/ bundle (its entry and code-split chunks) and the linux-x64
 * single executable, which has no package: its version is baked in and its artifacts
 * directory is the one it sits in. Observed as an operator sees them: `--version`, the
 * `artifacts:` line `bootseal serve` prints, the metrics' build info, and Swagger UI's files
 * (the package's dependency; the executable has none and serves the plain /docs page).
 * (The packed and installed package: test/build/package-install.test.ts.)
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { chmod, copyFile, mkdir, mkdtemp } from "node:fs/promises";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { CLI, REPO, tempDir } from "../fetcher/helpers.ts";
import { DIST_BIN, ensureDist } from "../helpers/built-dist.ts";
import { builtSea } from "../helpers/built-sea.ts";
import { startServeCommand } from "../helpers/serve-process.ts";
import { until } from "../helpers/until.ts";

const VERSION = (JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string }).version;
const REPO_SEA = join(REPO, "sea");
const linuxX64 = process.platform === "linux" && process.arch === "x64";

let dir: { path: string; remove: () => Promise<void> };
let seaExe: string;

before(
  async () => {
    ensureDist();
    dir = await tempDir("package-paths");
    if (linuxX64) {
      // The built executable, alone in a directory of its own: its artifacts directory is that one.
      seaExe = join(dir.path, "sea", "bootseal-linux-x64");
      await mkdir(dirname(seaExe));
      await copyFile((await builtSea()).linuxX64, seaExe);
      await chmod(seaExe, 0o755);
    }
  },
  { timeout: 600_000 },
);

after(() => dir?.remove());

interface Form {
  readonly name: string;
  readonly command: () => [string, ...string[]];
  readonly artifactsDir: () => string;
  /** Swagger UI's files: the package's dependency; the executable has no node_modules. */
  readonly swaggerUi: boolean;
  readonly skip?: string | false;
}

const FORMS: readonly Form[] = [
  {
    name: "the sources (node src/cli/main.ts)",
    command: () => [process.execPath, CLI],
    artifactsDir: () => REPO_SEA,
    swaggerUi: true,
  },
  {
    name: "the dist/ bundle (dist/cli/main.js, its chunks)",
    command: () => [process.execPath, DIST_BIN],
    artifactsDir: () => REPO_SEA,
    swaggerUi: true,
  },
  {
    name: "the linux-x64 single executable (no package: its own directory)",
    command: () => [seaExe],
    artifactsDir: () => join(dir.path, "sea"),
    swaggerUi: false,
    skip: !linuxX64 && "the executable is built and run for linux-x64",
  },
];

for (const form of FORMS) {
  test(`${form.name}: --version, serve's artifacts directory, the metrics' version, Swagger UI`, {
    skip: form.skip ?? false,
  }, async () => {
    // A working directory of its own: nothing may resolve against it.
    const cwd = await mkdtemp(join(dir.path, "cwd-"));
    const env = { PATH: process.env.PATH, HOME: process.env.HOME };
    const [file, ...args] = form.command();
    const version = spawnSync(file, [...args, "--version"], { cwd, env, encoding: "utf8" });
    assert.equal(version.status, 0, version.stderr);
    assert.equal(version.stdout, `bootseal ${VERSION}\n`);

    const service = await startServeCommand([file, ...args, "serve", "--data-dir", join(cwd, "data")], {
      env,
      cwd,
    });
    try {
      await until("the banner's last line", () => /token key:/.test(service.log()), { tries: 300 });
      const line = service.log().match(/^ {2}artifacts: +(.*)$/m)?.[1] ?? "";
      // The directory, then its executables in brackets or ": no executables, …".
      const expected = form.artifactsDir();
      assert.ok(line.startsWith(`${expected} (`) || line.startsWith(`${expected}: no executables, `), line);
      if (form.artifactsDir() === join(dir.path, "sea"))
        assert.equal(line, `${form.artifactsDir()} (bootseal-linux-x64)`);
      const metrics = await (await fetch(`${service.url}/metrics`)).text();
      assert.ok(
        metrics.includes(`\nbootseal_build_info{version="${VERSION}",`),
        "the package's version in the metrics",
      );
      const ui = await fetch(`${service.url}/docs/static/swagger-ui-bundle.js`);
      await ui.arrayBuffer();
      assert.equal(ui.status, form.swaggerUi ? 200 : 404);
    } finally {
      await service.stop();
    }
  });
}
