/**
 * The real single executables built from this tree, for tests that run them: the repository's
 * `sea/`, exactly as `npm start`'s `prestart` builds it (`scripts/build-sea.ts --if-missing`,
 * every platform, unsigned) and where the service looks by default (the package's `sea/`). So
 * it is built at most once per tree state (the stamp of inputs `--if-missing` compares), a
 * later `npm start` has nothing to build, and two test files asking at once wait for one build
 * (`flock` on a lock file beside it). Reproducibility is test/build/sea.test.ts's business: it
 * builds into directories of its own, signed.
 */
import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { REPO } from "../fetcher/helpers.ts";
import { runChild } from "./child.ts";

export const SEA_DIR = join(REPO, "sea");
const LOCK = join(SEA_DIR, ".build.lock");
const BUILD_SECONDS = 1200;

/**
 * The build's environment: PATH, and what says where the registry, its CA and the caches are.
 * Not BOOTSEAL_SIGNING_KEY: a signed build has other inputs, and `npm start` on a developer's
 * machine signs nothing either.
 */
export const BUILD_ENV = Object.fromEntries(
  Object.entries(process.env).filter(([k]) =>
    /^(PATH|HOME|XDG_CACHE_HOME|BOOTSEAL_SEA_CACHE|NODE_EXTRA_CA_CERTS|https?_proxy|HTTPS?_PROXY|NO_PROXY|no_proxy|npm_config_registry)$/.test(
      k,
    ),
  ),
) as Record<string, string>;

export interface BuiltSea {
  /** The repository's sea/: every executable, SHA256SUMS, the SBOM, the stamp. */
  readonly dir: string;
  readonly linuxX64: string;
}

let building: Promise<BuiltSea> | undefined;

async function build(): Promise<BuiltSea> {
  await mkdir(SEA_DIR, { recursive: true });
  const r = await runChild(
    "flock",
    ["--wait", String(BUILD_SECONDS), LOCK, process.execPath, "scripts/build-sea.ts", "--if-missing"],
    { env: BUILD_ENV, cwd: REPO },
  );
  assert.equal(r.status, 0, `scripts/build-sea.ts --if-missing: ${r.stderr}`);
  return { dir: SEA_DIR, linuxX64: join(SEA_DIR, "bootseal-linux-x64") };
}

/** This tree's executables in sea/, built first when the stamp says they are not this tree's. */
export function builtSea(): Promise<BuiltSea> {
  building ??= build().catch((err: unknown) => {
    building = undefined;
    throw err;
  });
  return building;
}
