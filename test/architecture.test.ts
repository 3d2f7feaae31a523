/**
 * The layering of docs/architecture.md is enforced by Biome (noRestrictedImports overrides in
 * biome.json). These tests check the enforcement itself: the checkout's biome.json is copied
 * into a scratch project next to fixture files that import across each boundary, and every
 * forbidden import must be reported while the allowed ones next to it must not; then the
 * real tree must have no violation at all.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import test from "node:test";

const REPO = join(import.meta.dirname, "..");
const BIOME = join(REPO, "node_modules", ".bin", "biome");
const LAYER_RULES = ["lint/style/noRestrictedImports", "lint/correctness/noProcessGlobal"];

interface Case {
  readonly file: string;
  /** An import specifier, or a whole module body. */
  readonly imports?: string;
  readonly body?: string;
  readonly forbidden: boolean;
}

const C = (file: string, imports: string, forbidden: boolean): Case => ({ file, imports, forbidden });

const CASES: readonly Case[] = [
  // 0 foundation: only each other.
  C("src/limits.ts", "./errors.ts", false),
  C("src/retry.ts", "./duration.ts", false),
  C("src/errors.ts", "./envelope/document.ts", true),
  C("src/duration.ts", "../providers/keys/age.ts", true),
  C("src/call-options.ts", "./cli/command.ts", true),
  C("src/files/a.ts", "../errors.ts", false),
  C("src/files/b.ts", "./atomic-write.ts", false),
  C("src/files/c.ts", "../machine/machine-id.ts", true),
  C("src/files/d.ts", "../../providers/stores/index.ts", true),
  // 1 envelope: pure, only itself and the foundation.
  C("src/envelope/a.ts", "../errors.ts", false),
  C("src/envelope/sops/b.ts", "./codecs/codec.ts", false),
  C("src/envelope/sops/c.ts", "node:crypto", false),
  C("src/envelope/sops/d.ts", "yaml", false),
  C("src/envelope/e.ts", "../../providers/keys/age.ts", true),
  C("src/envelope/sops/f.ts", "../../config/sops-config.ts", true),
  C("src/envelope/g.ts", "../machine/id.ts", true),
  C("src/envelope/h.ts", "../http/client.ts", true),
  C("src/envelope/i.ts", "../files/atomic-write.ts", true),
  C("src/envelope/j.ts", "../service/app.ts", true),
  C("src/envelope/k.ts", "../fetcher/fetch-run.ts", true),
  C("src/envelope/l.ts", "../cli/main.ts", true),
  C("src/envelope/m.ts", "node:fs/promises", true),
  C("src/envelope/n.ts", "node:fs", true),
  C("src/envelope/o.ts", "node:https", true),
  C("src/envelope/p.ts", "node:child_process", true),
  C("src/envelope/q.ts", "@aws-sdk/client-kms", true),
  C("src/envelope/r.ts", "@google-cloud/kms", true),
  C("src/envelope/s.ts", "@azure/identity", true),
  C("src/envelope/t.ts", "openpgp", true),
  C("src/envelope/u.ts", "age-encryption", true),
  C("src/envelope/v.ts", "fastify", true),
  { file: "src/envelope/w.ts", body: "export const home = process.env.HOME;\n", forbidden: true },
  // 2 providers: layers 0-1 only.
  C("providers/keys/a.ts", "../../src/envelope/sops/key-groups.ts", false),
  C("providers/keys/b.ts", "../../src/errors.ts", false),
  C("providers/stores/c.ts", "@aws-sdk/client-s3", false),
  C("providers/stores/j.ts", "../../src/files/atomic-write.ts", false),
  C("providers/keys/d.ts", "../../src/config/sops-config.ts", true),
  C("providers/keys/e.ts", "../../src/machine/id.ts", true),
  C("providers/stores/f.ts", "../../src/http/client.ts", true),
  C("providers/stores/g.ts", "../../src/service/app.ts", true),
  C("providers/stores/h.ts", "../../src/fetcher/source.ts", true),
  C("providers/keys/i.ts", "../../src/cli/main.ts", true),
  // 3 shared homes: layers 0-3.
  C("src/http/a.ts", "../../providers/stores/index.ts", false),
  C("src/artifact/b.ts", "../files/read-bounded.ts", false),
  C("src/http/e.ts", "../files/token-file.ts", false),
  C("src/machine/c.ts", "../envelope/document.ts", false),
  C("src/http/d.ts", "../config/sops-config.ts", true),
  C("src/files/e.ts", "../fetcher/paths.ts", true),
  C("src/artifact/f.ts", "../cli/command.ts", true),
  C("src/machine/g.ts", "../service/app.ts", true),
  // 4 config: layers 0-3.
  C("src/config/a.ts", "../machine/id.ts", false),
  C("src/config/b.ts", "../service/app.ts", true),
  C("src/config/c.ts", "../fetcher/source.ts", true),
  C("src/config/d.ts", "../cli/main.ts", true),
  // 5 fetcher and service: layers 0-4, never each other, never the CLI.
  C("src/fetcher/a.ts", "../config/sops-config.ts", false),
  C("src/fetcher/b.ts", "../http/client.ts", false),
  C("src/fetcher/c.ts", "../service/app.ts", true),
  C("src/fetcher/d.ts", "../cli/command.ts", true),
  {
    file: "src/fetcher/e.ts",
    body: 'export async function load() {\n  return await import("../cli/main.ts");\n}\n',
    forbidden: true,
  },
  { file: "src/fetcher/f.ts", body: 'export type { CliIo } from "../cli/command.ts";\n', forbidden: true },
  C("src/service/a.ts", "../config/service-config.ts", false),
  C("src/service/routes/b.ts", "../../fetcher/source.ts", true),
  C("src/service/plugins/c.ts", "../../cli/main.ts", true),
  C("src/service/d.ts", "../controller/reconciler.ts", true),
  C("src/fetcher/g.ts", "../controller/reconciler.ts", true),
  // 5 the Cluster API controller: layers 0-4, never the service, the fetcher or the CLI.
  C("src/controller/a.ts", "../http/client.ts", false),
  C("src/controller/b.ts", "../machine/machine-id.ts", false),
  C("src/controller/c.ts", "@kubernetes/client-node", false),
  C("src/controller/d.ts", "../service/app.ts", true),
  C("src/controller/e.ts", "../fetcher/fetch-run.ts", true),
  C("src/controller/f.ts", "../cli/command.ts", true),
  C("src/config/e.ts", "../controller/reconciler.ts", true),
  C("src/http/f.ts", "../controller/reconciler.ts", true),
  C("providers/keys/j.ts", "../../src/controller/reconciler.ts", true),
  C("src/envelope/x.ts", "../controller/reconciler.ts", true),
  C("src/service/routes/d.ts", "../fleet-page/assets.generated.ts", false),
  C("src/service/routes/e.ts", "../fleet-page/browser/sse.ts", true),
  // The fleet page's browser code: only its own directory ...
  C("src/service/fleet-page/browser/a.ts", "./sse.ts", false),
  C("src/service/fleet-page/browser/b.ts", "../assets.generated.ts", true),
  C("src/service/fleet-page/browser/c.ts", "../../app.ts", true),
  C("src/service/fleet-page/browser/d.ts", "node:crypto", true),
  C("src/service/fleet-page/browser/e.ts", "fastify", true),
  C("src/service/fleet-page/browser/f.ts", "@fastify/swagger", true),
  // ... and the two pure files of the status protocol (its phases) and of a machine's boot
  // summary (what the list shows of it), nothing else outside it.
  C("src/service/fleet-page/browser/g.ts", "../../../machine/status-protocol.ts", false),
  C("src/service/fleet-page/browser/l.ts", "../../../machine/boot-summary.ts", false),
  C("src/service/fleet-page/browser/m.ts", "../../../machine/text-budget.ts", true),
  C("src/service/fleet-page/browser/h.ts", "../../../machine/machine-id.ts", true),
  C("src/service/fleet-page/browser/i.ts", "../../../machine/status-protocol.ts/../machine-id.ts", true),
  C("src/service/fleet-page/browser/j.ts", "../status-protocol.ts", true),
  C("src/service/fleet-page/browser/k.ts", "../../../fetcher/report.ts", true),
  // 6 the CLI (and tests) may import anything.
  C("src/cli/a.ts", "../fetcher/fetch-run.ts", false),
  C("src/cli/commands/b.ts", "../../service/app.ts", false),
  C("src/cli/commands/c.ts", "../../controller/run.ts", false),
  C("test/c.ts", "../src/cli/main.ts", false),
];

interface Diagnostic {
  readonly category: string;
  readonly message: string;
  readonly location: { readonly path: string };
}

/** Runs Biome's linter in `cwd` and returns its diagnostics (it exits 1 when there are errors). */
function lint(cwd: string, args: readonly string[]): Promise<Diagnostic[]> {
  return new Promise((resolve, reject) => {
    execFile(
      BIOME,
      ["lint", "--reporter=json", "--max-diagnostics=none", "--colors=off", ...args],
      { cwd, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const start = stdout.indexOf("{");
        if (start < 0) {
          reject(
            new Error(`biome printed no report (${err?.message ?? "no error"}): ${stderr.slice(0, 500)}`),
          );
          return;
        }
        const report = JSON.parse(stdout.slice(start)) as { diagnostics: Diagnostic[] };
        resolve(report.diagnostics);
      },
    );
  });
}

test("biome.json reports every import across a layer boundary, and none of the allowed ones", async () => {
  const dir = await mkdtemp(join(tmpdir(), "bootseal-architecture-"));
  try {
    const config = JSON.parse(await readFile(join(REPO, "biome.json"), "utf8")) as Record<string, unknown>;
    delete config.$schema; // the scratch project has no node_modules
    config.vcs = { enabled: false };
    await writeFile(join(dir, "biome.json"), JSON.stringify(config));
    for (const c of CASES) {
      const body = c.body ?? `import { x } from "${c.imports}";\n\nexport const y = x;\n`;
      await mkdir(dirname(join(dir, c.file)), { recursive: true });
      await writeFile(join(dir, c.file), body);
    }
    const diagnostics = await lint(dir, ["."]);
    const flagged = new Map<string, string[]>();
    for (const d of diagnostics) {
      if (!LAYER_RULES.includes(d.category)) continue;
      const path = d.location.path.replace(/^\.\//, "");
      flagged.set(path, [...(flagged.get(path) ?? []), d.message]);
    }
    const wrong: string[] = [];
    for (const c of CASES) {
      const messages = flagged.get(c.file);
      const what = `${c.file} -> ${c.imports ?? c.body?.trim()}`;
      if (c.forbidden && messages === undefined) wrong.push(`not reported: ${what}`);
      if (!c.forbidden && messages !== undefined) wrong.push(`reported but allowed: ${what}: ${messages[0]}`);
    }
    assert.deepEqual(wrong, []);
    // The messages point at the document that explains the rule.
    for (const [path, messages] of flagged) {
      if (!path.startsWith("src/envelope/w.ts")) {
        assert.match(messages[0] as string, /docs\/architecture\.md/, path);
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("the checkout itself breaks no layer rule", async () => {
  const diagnostics = await lint(REPO, ["src", "providers"]);
  const violations = diagnostics
    .filter((d) => LAYER_RULES.includes(d.category))
    .map((d) => `${d.location.path}: ${d.message}`);
  assert.deepEqual(violations, []);
});
