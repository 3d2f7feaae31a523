/**
 * User data out of the box: the real `bootseal serve` with the embedded default (no config
 * file) and a stand-in artifact directory answers 200 for every format, twice the same bytes,
 * whatever Host header the caller sends, and generated its derivation and signing keys mode 0600.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { stopChild } from "../helpers/child.ts";

const mainTs = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const root = mkdtempSync(join(tmpdir(), "bootseal-ud-embedded-"));
after(() => rmSync(root, { recursive: true, force: true }));

function serve(dataDir: string, artifacts: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [mainTs, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "warn"],
    { stdio: ["ignore", "pipe", "pipe"], env: { PATH: process.env.PATH, BOOTSEAL_ARTIFACTS_DIR: artifacts } },
  );
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${out}`)), 60_000);
    child.stderr?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match && out.includes("token key:")) {
        clearTimeout(timer);
        resolve({ child, url: match[1] as string });
      }
    });
    child.once("exit", (code) => reject(new Error(`serve exited early (${code}): ${out}`)));
  });
}

test("embedded default: every user-data format answers 200, stable, keys generated 0600", {
  timeout: 120_000,
}, async () => {
  const artifacts = join(root, "sea");
  mkdirSync(artifacts);
  for (const f of ["bootseal-linux-x64", "bootseal-linux-arm64", "bootseal-windows-x64.exe"]) {
    writeFileSync(join(artifacts, f), randomBytes(4096));
  }
  const dataDir = join(root, "data");
  const { child, url } = await serve(dataDir, artifacts);
  try {
    const token = readFileSync(join(dataDir, "keys", "controller-token"), "utf8").trim();
    const auth = { authorization: `Bearer ${token}` };
    const put = await fetch(`${url}/v1/machines/default/worker-0/config`, {
      method: "PUT",
      headers: { ...auth, "content-type": "text/plain" },
      body: "#cloud-config\nruncmd: [echo hi]\n",
    });
    assert.equal(put.status, 201, await put.text());
    for (const format of ["cloud-init", "ignition", "powershell"]) {
      const get = () =>
        fetch(`${url}/v1/machines/default/worker-0/userdata?format=${format}`, { headers: auth });
      const one = await get();
      const body = await one.text();
      assert.equal(one.status, 200, `${format}: ${body}`);
      assert.ok(
        body.includes(`${url}/v1/artifacts/bootseal-`),
        `${format} points at the service's artifacts`,
      );
      assert.equal(await (await get()).text(), body, `${format}: the same bytes again`);
    }
    // A hostile Host header changes nothing: the stub names the loopback listener itself.
    const { request } = await import("node:http");
    const hostile = await new Promise<string>((resolve, reject) => {
      const u = new URL(`${url}/v1/machines/default/worker-0/userdata?format=cloud-init`);
      const req = request(u, { headers: { ...auth, host: "evil.example.com" } }, (res) => {
        let text = "";
        res.on("data", (c: Buffer) => {
          text += c.toString();
        });
        res.on("end", () => resolve(text));
      });
      req.on("error", reject);
      req.end();
    });
    assert.ok(!hostile.includes("evil.example.com"), "the Host header never reaches the stub");
    assert.ok(hostile.includes(`${url}/v1/artifacts/bootseal-`), "the stub names the listener's own address");
    // skipModule (what a BootsealConfig's skipModules sends): the stub's fetch skips them.
    const skipping = await fetch(
      `${url}/v1/machines/default/worker-0/userdata?format=cloud-init&skipModule=ntp&skipModule=mounts`,
      { headers: auth },
    );
    assert.equal(skipping.status, 200);
    assert.match(await skipping.text(), /--skip-module ntp --skip-module mounts/);
    const refused = await fetch(
      `${url}/v1/machines/default/worker-0/userdata?format=cloud-init&skipModule=NTP`,
      {
        headers: auth,
      },
    );
    assert.equal(refused.status, 400);
    for (const key of ["bootstrap-token-derivation.key", "artifact-signing.pem"]) {
      assert.equal(statSync(join(dataDir, "keys", key)).mode & 0o777, 0o600, key);
    }
  } finally {
    await stopChild(child);
  }
});
