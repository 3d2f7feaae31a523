/**
 * The package root (and so the default artifacts directory `<root>/sea`) is the same from every
 * place the code can end up: the source tree, the bundle's entry, a code-split chunk one level
 * deeper (where `../../sea` once pointed at dist/sea and `npm start` could make no user data),
 * and an npm install under node_modules.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { packageRoot } from "../../src/config/package-root.ts";
import { validateServiceConfig } from "../../src/config/service-config.ts";
import { REPO } from "../fetcher/helpers.ts";

const repo = REPO.replace(/\/$/, "");
const at = (...parts: string[]) => pathToFileURL(join(repo, ...parts)).href;

test("the package root from src, dist's entry and a dist chunk is the repository", () => {
  assert.equal(packageRoot(at("src/config/service-config.ts")), repo);
  assert.equal(packageRoot(at("dist/cli/main.js")), repo);
  assert.equal(packageRoot(at("dist/cli/chunks/chunk-ABCDEF.js")), repo);
  assert.equal(packageRoot(undefined), undefined);
});

test("an npm install: the installed package's own root, not the project's", () => {
  const project = mkdtempSync(join(tmpdir(), "bootseal-pkg-root-"));
  try {
    writeFileSync(join(project, "package.json"), "{}");
    const installed = join(project, "node_modules", "bootseal");
    mkdirSync(join(installed, "dist", "cli", "chunks"), { recursive: true });
    writeFileSync(join(installed, "package.json"), '{"name":"bootseal"}');
    const chunk = pathToFileURL(join(installed, "dist/cli/chunks/chunk-X.js")).href;
    assert.equal(packageRoot(chunk), installed);
  } finally {
    rmSync(project, { recursive: true, force: true });
  }
});

test("a configuration without artifacts.dir serves <package>/sea, whatever the working directory", () => {
  const config = validateServiceConfig(
    {
      store: "file:///tmp/bootseal-pkg-root-store",
      creation_rules: [{ age: "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p" }],
      controllers: [{ name: "c", tokenSha256: "0".repeat(64), scopes: ["configs:write"] }],
    },
    "/",
  );
  assert.equal(config.artifacts.dir, join(repo, "sea"));
});
