/**
 * The single executable, this tree's linux-x64 build in the package's sea/ (built once for
 * every test that runs it: test/helpers/built-sea.ts): --version, one fetch end to end, sign-artifact / verify-artifact, and a flipped
 * byte refused. Also checks the signature with OpenSSL, as the user-data stubs do.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFile, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { ageKey, encrypt, MANIFEST, machineEnv, REPO, run, tempDir } from "../fetcher/helpers.ts";
import { builtSea } from "../helpers/built-sea.ts";

let dir: { path: string; remove: () => Promise<void> };
let exe: string;
let seaDir: string;

before(async () => {
  dir = await tempDir("sea");
  const sea = await builtSea();
  exe = sea.linuxX64;
  seaDir = sea.dir;
});
after(async () => {
  await dir?.remove();
});

test("the executable runs --version and --help without Node installed beside it", async () => {
  const pkg = JSON.parse(await readFile(join(REPO, "package.json"), "utf8"));
  const v = await run(["--version"], { PATH: "/usr/bin:/bin" }, exe);
  assert.equal(v.code, 0, v.stderr);
  assert.equal(v.stdout, `bootseal ${pkg.version}\n`);
  const h = await run(["--help"], { PATH: "/usr/bin:/bin" }, exe);
  assert.match(h.stdout, /fetch/);
  assert.match(h.stdout, /verify-artifact/);
  const sha = (await readFile(join(seaDir, "SHA256SUMS"), "utf8")).split(" ")[0];
  const check = spawnSync("sha256sum", [exe], { encoding: "utf8" });
  assert.equal(check.stdout.split(" ")[0], sha);
});

test("the executable fetches, decrypts and writes end to end (file:// source, age key)", async () => {
  const key = await ageKey(dir.path, "sea");
  const doc = join(dir.path, "doc.json");
  await writeFile(doc, await encrypt(MANIFEST, ["--age", key.recipient, "--input-type", "binary"]));
  const root = join(dir.path, "root");
  await mkdir(root);
  const r = await run(
    ["fetch", "--from", `file://${doc}`, "--apply", "--root", root, "--exec", "echo ran"],
    machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
    exe,
  );
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /ran/);
  assert.equal(await readFile(join(root, "var/lib/kubelet/token"), "utf8"), "s3cr3t-join-token");
  assert.equal((await stat(join(root, "etc/kubernetes/bootstrap-kubelet.conf"))).mode & 0o777, 0o640);
  assert.equal(await readFile(join(root, "run/cluster-api/bootstrap-success.complete"), "utf8"), "success\n");
});

test("sign-artifact / verify-artifact; a flipped byte fails verification; OpenSSL agrees", async () => {
  const keyFile = join(dir.path, "release.pem");
  const gen = await run(["sign-artifact", "--generate-key", keyFile], machineEnv());
  assert.equal(gen.code, 0, gen.stderr);
  assert.equal((await stat(keyFile)).mode & 0o777, 0o600);
  const pub = join(dir.path, "release.pub.pem");

  const signed = await run(["sign-artifact", "--key", keyFile, exe], machineEnv());
  assert.equal(signed.code, 0, signed.stderr);
  assert.equal((await readFile(`${exe}.sig`)).length, 64);
  const ok = await run(
    ["verify-artifact", "--public-key", pub, "--sha256", `${exe}.sha256`, exe],
    machineEnv(),
  );
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /^OK [0-9a-f]{64} {2}bootseal-linux-x64\n$/);
  // the executable verifies a copy of itself
  const self = await run(
    ["verify-artifact", "--public-key", pub, "--signature", `${exe}.sig`, exe],
    machineEnv(),
    exe,
  );
  assert.equal(self.code, 0, self.stderr);

  const ossl = spawnSync(
    "openssl",
    ["pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin", "-in", exe, "-sigfile", `${exe}.sig`],
    { encoding: "utf8" },
  );
  if (ossl.error === undefined) assert.match(ossl.stdout + ossl.stderr, /Signature Verified Successfully/);

  const flipped = join(dir.path, "bootseal-flipped");
  await copyFile(exe, flipped);
  const bytes = await readFile(flipped);
  const at = Math.floor(bytes.length / 2);
  bytes[at] = (bytes[at] as number) ^ 0x01;
  await writeFile(flipped, bytes);
  const bad = await run(
    ["verify-artifact", "--public-key", pub, "--signature", `${exe}.sig`, flipped],
    machineEnv(),
  );
  assert.equal(bad.code, EXIT_CODES.MAC_MISMATCH);
  assert.match(bad.stderr, /signature does not verify/);
  const badSha = await run(
    [
      "verify-artifact",
      "--public-key",
      pub,
      "--signature",
      `${exe}.sig`,
      "--sha256",
      `${exe}.sha256`,
      flipped,
    ],
    machineEnv(),
  );
  assert.equal(badSha.code, EXIT_CODES.MAC_MISMATCH);
  assert.match(badSha.stderr, /SHA-256 mismatch/);
  // another key's public half
  const other = join(dir.path, "other.pem");
  await run(["sign-artifact", "--generate-key", other], machineEnv());
  const wrong = await run(
    ["verify-artifact", "--public-key", join(dir.path, "other.pub.pem"), "--signature", `${exe}.sig`, exe],
    machineEnv(),
  );
  assert.equal(wrong.code, EXIT_CODES.MAC_MISMATCH);
  // base64 signatures are accepted too
  const b64 = join(dir.path, "sig.b64");
  await writeFile(b64, `${(await readFile(`${exe}.sig`)).toString("base64")}\n`);
  const viaB64 = await run(["verify-artifact", "--public-key", pub, "--signature", b64, exe], machineEnv());
  assert.equal(viaB64.code, 0, viaB64.stderr);
});
