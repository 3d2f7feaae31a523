/**
 * The files beside the executables: SHA256SUMS (the `sha256sum` format, so `sha256sum -c`
 * checks it), an Ed25519 signature per executable and for SHA256SUMS (raw 64 bytes, see
 * src/artifact/signing.ts), and the stamp `--if-missing` compares: a digest of every input
 * the build reads from the tree, so a rebuild is skipped only when nothing changed.
 */

import type { KeyObject } from "node:crypto";
import { createHash } from "node:crypto";
import { readdir, readFile, stat } from "node:fs/promises";
import { join, relative } from "node:path";
import { sha256Hex, signArtifact } from "../../src/artifact/signing.ts";

export const SUMS = "SHA256SUMS";
export const SBOM = "bootseal.cdx.json";
export const STAMP = ".build-inputs.json";

export function sumsFile(files: readonly { name: string; bytes: Uint8Array }[]): string {
  // "HASH  NAME": two spaces, text mode, as sha256sum writes it.
  return files.map((f) => `${sha256Hex(f.bytes)}  ${f.name}\n`).join("");
}

export function signatures(
  files: readonly { name: string; bytes: Uint8Array }[],
  key: KeyObject,
): { name: string; bytes: Uint8Array }[] {
  return files.map((f) => ({ name: `${f.name}.sig`, bytes: signArtifact(f.bytes, key) }));
}

async function listFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(join(e.parentPath, e.name));
  }
  return out;
}

/** sha256 over the paths and bytes of src/, the build scripts, package.json and package-lock.json. */
export async function inputsDigest(repo: string, extra: string): Promise<string> {
  const files = [
    ...(await listFiles(join(repo, "src"))),
    ...(await listFiles(join(repo, "scripts/sea"))),
    join(repo, "scripts/build-sea.ts"),
    join(repo, "package.json"),
    join(repo, "package-lock.json"),
  ]
    .map((f) => relative(repo, f))
    .sort();
  const h = createHash("sha256").update(extra);
  for (const f of files) {
    h.update(`\0${f}\0`);
    h.update(await readFile(join(repo, f)));
  }
  return h.digest("hex");
}

export interface Stamp {
  inputs: string;
  /** Every output file and its size: a missing or truncated one means rebuild. */
  files: Record<string, number>;
}

export async function stampHolds(outDir: string, inputs: string): Promise<boolean> {
  try {
    const stamp = JSON.parse(await readFile(join(outDir, STAMP), "utf8")) as Stamp;
    if (stamp.inputs !== inputs) return false;
    for (const [name, size] of Object.entries(stamp.files)) {
      if ((await stat(join(outDir, name))).size !== size) return false;
    }
    return true;
  } catch {
    return false;
  }
}
