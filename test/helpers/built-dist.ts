/**
 * The dist/ bundle the tests that run it need: built (scripts/bundle.ts) only when missing,
 * so a test never rebuilds dist/ under another one that runs it. A dist/ from before the
 * split into main.js and bootseal.js has no bootseal.js, so it is rebuilt too.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { REPO } from "../fetcher/helpers.ts";

/** The npm bin entry, dist/cli/main.js. */
export const DIST_BIN = join(REPO, "dist/cli/main.js");

export function ensureDist(): void {
  if (existsSync(join(REPO, "dist/cli/bootseal.js"))) return;
  const r = spawnSync(process.execPath, ["scripts/bundle.ts"], {
    cwd: REPO,
    encoding: "utf8",
    timeout: 300_000,
  });
  assert.equal(r.status, 0, `scripts/bundle.ts: ${r.stderr}`);
}
