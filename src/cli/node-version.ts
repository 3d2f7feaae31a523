/**
 * The Node version the CLI needs, checked by the npm bin entry (./bin.ts) before the bundle
 * loads. Imports nothing, and uses only syntax an old Node parses: it is bundled into that
 * entry for Node 14's syntax (scripts/bundle.ts).
 */

/** package.json's `engines.node` (">=22"); test/cli/bin.test.ts keeps the two equal. */
export const MIN_NODE_MAJOR = 22;

/** exit-codes.ts's USAGE and INTERNAL, written out so that the entry imports nothing else (the test compares). */
export const EXIT_USAGE = 1;
export const EXIT_INTERNAL = 70;

/** The one line for a Node older than MIN_NODE_MAJOR ("20.20.2"), or null when this one will do. */
export function nodeVersionProblem(version: string): string | null {
  const major = Number(version.split(".")[0]);
  if (major >= MIN_NODE_MAJOR) return null;
  return `bootseal needs Node.js >= ${MIN_NODE_MAJOR} (this is ${version})`;
}
