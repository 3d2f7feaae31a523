/**
 * The two test lanes (docs/development.md, "Test lanes"). A test file is a PEER test when it,
 * or any module of ours it imports (transitively), imports test/helpers/peers.ts: that is
 * the one way a test reaches a real peer. Every other test file is a UNIT test and runs with
 * no peer at all (`npm run test:unit`). The peer files are listed in peer-tests.txt, which
 * scripts/test.sh reads; lanes.test.ts fails when the list and the imports disagree.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

export const REPO = resolve(import.meta.dirname, "../..");
export const PEER_LIST = join(REPO, "test/helpers/peer-tests.txt");
const PEERS_HELPER = join(REPO, "test/helpers/peers.ts");

/** Every test file under test/, as a repository-relative path with '/' separators, sorted. */
export function allTestFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== "fixtures") walk(p);
      } else if (e.name.endsWith(".test.ts")) out.push(relative(REPO, p));
    }
  };
  walk(join(REPO, "test"));
  return out.sort();
}

/** The files listed in peer-tests.txt (blank lines and '#' comments ignored), sorted. */
export function listedPeerFiles(): string[] {
  return readFileSync(PEER_LIST, "utf8")
    .split("\n")
    .map((l) => l.replace(/#.*/, "").trim())
    .filter(Boolean)
    .sort();
}

// Static imports, re-exports and dynamic imports with a literal relative specifier.
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["'](\.{1,2}\/[^"']+)["']/g;

/** The local modules a file imports directly (absolute paths of files that exist). */
function localImports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const target = resolve(dirname(file), m[1] as string);
    if (existsSync(target)) out.push(target);
  }
  return out;
}

/** True when `file` reaches test/helpers/peers.ts through its imports. */
export function needsPeers(file: string, seen = new Set<string>()): boolean {
  const abs = resolve(REPO, file);
  if (abs === PEERS_HELPER) return true;
  if (seen.has(abs)) return false;
  seen.add(abs);
  // Only our test-side modules can lead to the helper; src/ and providers/ never import test/.
  if (!abs.startsWith(join(REPO, "test") + "/") && !abs.startsWith(join(REPO, "bench") + "/")) return false;
  return localImports(abs).some((dep) => needsPeers(dep, seen));
}
