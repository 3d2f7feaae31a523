/**
 * test/helpers/built-sea.ts: the build of sea/ waits for another holder of its lock (a
 * concurrent test file's build), and gives the tree's build where and as `npm start` wants it:
 * its `prestart` (`build-sea.ts --if-missing`) then has nothing to do.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { REPO, tempDir } from "../fetcher/helpers.ts";
import { BUILD_ENV, builtSea, SEA_DIR } from "./built-sea.ts";
import { runChild } from "./child.ts";

/** How long the other holder keeps the lock while builtSea is waiting (the fast path takes ~1 s). */
const HELD_MS = 3000;

test("builtSea waits for the lock's other holder, then gives this tree's build in the package's sea/", {
  timeout: 900_000,
}, async () => {
  const dir = await tempDir("built-sea");
  // Another test file's build, as far as the lock can tell: holds it until the file appears.
  // Its own process group, so that a failed check can end flock and its shell together.
  const release = join(dir.path, "release");
  await mkdir(SEA_DIR, { recursive: true });
  const holder = spawn(
    "flock",
    [join(SEA_DIR, ".build.lock"), "sh", "-c", 'echo held; while [ ! -e "$0" ]; do sleep 0.1; done', release],
    { detached: true, stdio: ["ignore", "pipe", "inherit"] },
  );
  try {
    const exited = new Promise<number | null>((r) => holder.once("exit", r));
    await new Promise<void>((r) => holder.stdout.once("data", () => r()));
    let done = false;
    const built = builtSea().then((b) => {
      done = true;
      return b;
    });
    await new Promise((r) => setTimeout(r, HELD_MS));
    assert.equal(done, false, "no result while another process holds the lock");
    await writeFile(release, "");
    assert.equal(await exited, 0);
    const sea = await built;
    assert.equal(sea.dir, join(REPO, "sea"));
    assert.equal(sea.linuxX64, join(REPO, "sea/bootseal-linux-x64"));

    // package.json's prestart, as `npm start` runs it (`node` there is Node 24, as here).
    const pkg = JSON.parse(await readFile(join(REPO, "package.json"), "utf8"));
    const [node, ...args] = (pkg.scripts.prestart as string).split(" ");
    assert.equal(node, "node");
    const prestart = await runChild(process.execPath, args, { env: BUILD_ENV, cwd: REPO });
    assert.equal(prestart.status, 0, prestart.stderr);
    assert.equal(prestart.stdout.toString(), `build-sea: ${SEA_DIR} is up to date\n`);
  } finally {
    if (holder.exitCode === null) process.kill(-(holder.pid as number), "SIGTERM");
    await dir.remove();
  }
});
