/**
 * Rewrites the generated sections of docs/cli.md from the commands' flag tables
 * (src/cli/docs.ts). `--check` only compares, and exits 1 when the doc is stale.
 *
 * Usage: node scripts/cli-docs.ts [--check]
 */
import { readFile, writeFile } from "node:fs/promises";
import { argv } from "node:process";
import { fileURLToPath } from "node:url";
import { loadAllCommands } from "../src/cli/command-registry.ts";
import { cliDocSections, replaceGenerated } from "../src/cli/docs.ts";

const DOC = fileURLToPath(new URL("../docs/cli.md", import.meta.url));
const doc = await readFile(DOC, "utf8");
const commands = await loadAllCommands();
const fresh = replaceGenerated(doc, cliDocSections(commands));
if (argv.includes("--check")) {
  if (fresh !== doc) {
    process.stderr.write("docs/cli.md is stale: run node scripts/cli-docs.ts\n");
    process.exitCode = 1;
  }
} else if (fresh !== doc) {
  await writeFile(DOC, fresh);
  process.stdout.write("docs/cli.md updated\n");
}
