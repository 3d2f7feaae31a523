/**
 * The fleet page is in the program itself (assets.generated.ts), not beside it: the real
 * `bootseal serve` on the embedded default serves the page and its assets both from the
 * sources (`node src/cli/main.ts`, what the tests run) and from the dist/ bundle (what
 * `npm start` runs; built by `npm ci` / `node scripts/bundle.ts`). The single-file
 * executables bundle the same module (test/build/sea.test.ts builds them).
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { FLEET_PAGE } from "../../src/service/fleet-page/assets.generated.ts";
import { PAGE_CSP } from "../../src/service/plugins/http-edge.ts";
import { REPO } from "../fetcher/helpers.ts";
import { stopChild } from "../helpers/child.ts";

function serve(entry: string, dataDir: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [entry, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "warn"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${out}`)), 120_000);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve({ child, url: match[1] as string });
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => reject(new Error(`serve exited early (${code}): ${out}`)));
  });
}

for (const entry of ["src/cli/main.ts", "dist/cli/main.js"]) {
  test(`${entry} serve: GET / is the page, its assets answer, with the page CSP`, async () => {
    const dir = await mkdtemp(join(tmpdir(), "bootseal-fleet-serve-"));
    const { child, url } = await serve(join(REPO, entry), dir);
    try {
      const page = await fetch(`${url}/`);
      assert.equal(page.status, 200);
      assert.equal(page.headers.get("content-security-policy"), PAGE_CSP);
      const html = await page.text();
      // dist/ is as fresh as its last build (npm ci, node scripts/bundle.ts): the sources' page
      // exactly, the bundle's a page with its own assets.
      if (entry.startsWith("src/")) assert.equal(html, FLEET_PAGE.body);
      else assert.match(html, /<title>bootseal fleet<\/title>/);
      const names = [...html.matchAll(/"ui\/([^"]+)"/g)].map((m) => m[1] as string);
      assert.equal(names.length, 2);
      for (const name of names) {
        const asset = await fetch(`${url}/ui/${name}`);
        assert.equal(asset.status, 200, name);
        assert.ok((await asset.text()).length > 100, name);
      }
    } finally {
      await stopChild(child);
      await rm(dir, { recursive: true, force: true });
    }
  });
}
