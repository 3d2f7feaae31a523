/**
 * A Node older than the CLI's floor, to check the bin's one-line refusal: the machine's own
 * (/usr/bin/node, Node 20 here) or BOOTSEAL_TEST_OLD_NODE. Undefined when there is none.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { MIN_NODE_MAJOR } from "../../src/cli/node-version.ts";

export function oldNode(): { path: string; version: string } | undefined {
  for (const path of [process.env.BOOTSEAL_TEST_OLD_NODE, "/usr/bin/node", "/usr/local/bin/node"]) {
    if (!path || !existsSync(path)) continue;
    const r = spawnSync(path, ["-p", "process.versions.node"], { encoding: "utf8" });
    const version = r.stdout.trim();
    if (r.status === 0 && Number(version.split(".")[0]) < MIN_NODE_MAJOR) return { path, version };
  }
  return undefined;
}
