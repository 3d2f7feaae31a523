/**
 * The real linux-x64 executable, as `npm start` builds it into the package's sea/
 * (test/helpers/built-sea.ts), served by the service from there over HTTP: the downloaded bytes
 * are the built ones, the served SHA256SUMS lines are the build's own, the signature verifies
 * with node:crypto and with OpenSSL exactly as the install script checks it, and the downloaded
 * executable runs (`--version`).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash, createPublicKey, verify } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { buildApp } from "../../src/service/app.ts";
import { builtSea } from "../helpers/built-sea.ts";
import { appConfig } from "./app-config.ts";

const root = mkdtempSync(join(tmpdir(), "bootseal-artifacts-sea-"));
after(() => rmSync(root, { recursive: true, force: true }));

const linuxX64 = process.platform === "linux" && process.arch === "x64";

test("the built linux-x64 executable: served, signature verified by node:crypto and OpenSSL, and it runs", {
  skip: linuxX64 ? false : "the build and the run are for linux-x64",
  timeout: 900_000,
}, async () => {
  const sea = await builtSea();
  const dir = sea.dir;
  const bytes = readFileSync(sea.linuxX64);
  const builtSums = readFileSync(join(dir, "SHA256SUMS"), "utf8").split("\n");

  const app = buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({ artifacts: { dir, signingKeyFile: join(root, "keys", "signing.pem") } }),
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  try {
    const address = app.server.address() as { port: number };
    const base = `http://127.0.0.1:${address.port}/v1/artifacts`;
    const exe = Buffer.from(await (await fetch(`${base}/bootseal-linux-x64`)).arrayBuffer());
    const sig = Buffer.from(await (await fetch(`${base}/bootseal-linux-x64.sig`)).arrayBuffer());
    const pem = await (await fetch(`${base}/signing-key.pem`)).text();
    const sums = await (await fetch(`${base}/SHA256SUMS`)).text();
    assert.ok(exe.equals(bytes), "the downloaded executable is the built one");
    const line = `${createHash("sha256").update(bytes).digest("hex")}  bootseal-linux-x64`;
    assert.ok(sums.split("\n").includes(line), sums);
    for (const l of sums.trimEnd().split("\n"))
      assert.ok(builtSums.includes(l), `the build's own line: ${l}`);
    assert.ok(verify(null, exe, createPublicKey(pem), sig), "node:crypto verifies the signature");

    // OpenSSL, as bootseal-install runs it on the machine.
    const files = join(root, "machine");
    mkdirSync(files);
    writeFileSync(join(files, "bootseal"), exe);
    writeFileSync(join(files, "bootseal.sig"), sig);
    writeFileSync(join(files, "artifact.pub"), pem);
    const ossl = spawnSync(
      "openssl",
      [
        "pkeyutl",
        "-verify",
        "-pubin",
        "-inkey",
        "artifact.pub",
        "-rawin",
        "-in",
        "bootseal",
        "-sigfile",
        "bootseal.sig",
      ],
      { cwd: files, encoding: "utf8", timeout: 120_000 },
    );
    assert.equal(ossl.status, 0, ossl.stderr);
    chmodSync(join(files, "bootseal"), 0o755);
    const run = spawnSync(join(files, "bootseal"), ["--version"], { encoding: "utf8", timeout: 120_000 });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /\d+\.\d+\.\d+/);
  } finally {
    await app.close();
  }
});
