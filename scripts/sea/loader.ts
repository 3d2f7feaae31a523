/**
 * The single executable's main script: a small loader that runs the bundle (a SEA asset) with
 * a V8 code cache kept on the user's disk. Why: V8 compiles the 11 MB bundle from scratch on
 * every start of an executable (~300 ms here, most of a small `decrypt`), and the blob cannot
 * carry a code cache without losing reproducible builds (its bytes differ from build to build).
 * The cache is made at run time instead, after the first run, from what that run compiled:
 * `$XDG_CACHE_HOME/bootseal` (else `~/.cache/bootseal`, `%LOCALAPPDATA%\bootseal` on
 * Windows), mode 0700, one file per bundle digest and architecture, written 0600 and renamed
 * into place. It is not used from a directory another user could write to, V8 itself refuses
 * a cache for other source or flags (and the loader then writes a fresh one), and
 * BOOTSEAL_SEA_CODE_CACHE=0 turns it off. A machine's `fetch` runs once: it neither writes one.
 */

/** The loader's source, for the bundle whose SHA-256 is `digest`. */
export function loaderSource(digest: string): string {
  return `"use strict";
const { getAsset } = require("node:sea");
const vm = require("node:vm");
const fs = require("node:fs");
const path = require("node:path");
const DIGEST = ${JSON.stringify(digest)};

function cacheDir() {
  const env = process.env;
  if (env.BOOTSEAL_SEA_CODE_CACHE === "0") return null;
  const base = env.XDG_CACHE_HOME || (process.platform === "win32" ? env.LOCALAPPDATA : env.HOME && path.join(env.HOME, ".cache"));
  return base ? path.join(base, "bootseal") : null;
}

/** Ours alone: a directory someone else can write to could hold their code for us to run. */
function private_(dir) {
  if (process.platform === "win32") return true;
  try {
    const st = fs.statSync(dir);
    return st.isDirectory() && st.uid === process.getuid() && (st.mode & 0o077) === 0;
  } catch {
    return false;
  }
}

function save(script, dir, file) {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (!private_(dir)) return;
    const tmp = file + "." + process.pid + ".tmp";
    fs.writeFileSync(tmp, script.createCachedData(), { mode: 0o600, flag: "wx" });
    fs.renameSync(tmp, file);
  } catch {
    // A read-only or full disk: the next start compiles again, nothing else changes.
  }
}

const code = getAsset("bootseal.cjs", "utf8");
const dir = cacheDir();
const file = dir && path.join(dir, "sea-" + DIGEST.slice(0, 32) + "-" + process.arch + ".v8cache");
let cachedData;
if (file && private_(dir)) {
  try {
    cachedData = fs.readFileSync(file);
  } catch {}
}
const script = new vm.Script("(function (exports, require, module, __filename, __dirname) {" + code + "\\n})", {
  filename: "bootseal.cjs",
  cachedData,
});
if (file && process.argv[2] !== "fetch" && (cachedData === undefined || script.cachedDataRejected)) {
  process.once("exit", () => save(script, dir, file));
}
const mod = { exports: {} };
script.runInThisContext().call(mod.exports, mod.exports, require, mod, process.execPath, path.dirname(process.execPath));
`;
}
