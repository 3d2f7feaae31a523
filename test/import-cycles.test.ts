/**
 * No import circle in src/ and providers/ (docs/architecture.md: imports run down the layers,
 * and within a layer a module can be read before the modules that use it). Every import
 * counts: static imports and re-exports, `import type` (a type-only circle is still two
 * modules that can only be understood together) and a lazy `import("./x.ts")` (the CLI's
 * command table loads each command so; a command that needs the table is handed it).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("..", import.meta.url));

/**
 * `import … from "x"`, `export … from "x"` (one line or several) and `import "x"` at a line
 * start, and `import("x")` with a literal anywhere.
 */
const IMPORT =
  /^[ \t]*(?:import|export)\b[^;"'`]*?\bfrom\s*["']([^"']+)["']|^[ \t]*import\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/gm;

/** The relative modules a source text imports, resolved against its own path. */
function relativeImports(file: string, text: string): string[] {
  return [...text.matchAll(IMPORT)]
    .map((m) => m[1] ?? m[2] ?? m[3] ?? "")
    .filter((spec) => spec.startsWith("."))
    .map((spec) => resolve(dirname(file), spec));
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return tsFiles(path);
    return e.name.endsWith(".ts") ? [path] : [];
  });
}

/** The strongly connected components of more than one module (Tarjan), each sorted. */
function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    order.set(v, order.size);
    low.set(v, order.get(v) as number);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!order.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, order.get(w) as number));
    }
    if (low.get(v) !== order.get(v)) return;
    const component: string[] = [];
    let w: string | undefined;
    do {
      w = stack.pop() as string;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!order.has(v)) visit(v);
  return found;
}

function importGraph(files: readonly string[], read: (file: string) => string): Map<string, string[]> {
  return new Map(files.map((f) => [f, relativeImports(f, read(f))]));
}

test("the import parser sees multi-line, type-only, re-export and lazy imports", () => {
  const sources: Record<string, string> = {
    "/r/a.ts": 'import {\n  b,\n  type B,\n} from "./b.ts";\nconst lazy = () => import("./d.ts");\n',
    "/r/b.ts": 'import type { C } from "./sub/c.ts";\nimport "node:fs";\n',
    "/r/sub/c.ts": 'export { a } from "../a.ts";\n',
    "/r/d.ts": 'import "./e.ts";\n',
    "/r/e.ts": "const s = \"import x from './a.ts'\";\nconst t = () => import(name);\n",
  };
  const graph = importGraph(Object.keys(sources), (f) => sources[f] as string);
  assert.deepEqual(graph.get("/r/a.ts"), ["/r/b.ts", "/r/d.ts"]);
  assert.deepEqual(graph.get("/r/b.ts"), ["/r/sub/c.ts"]);
  assert.deepEqual(graph.get("/r/sub/c.ts"), ["/r/a.ts"]);
  assert.deepEqual(graph.get("/r/d.ts"), ["/r/e.ts"]);
  assert.deepEqual(graph.get("/r/e.ts"), [], "not in a string, not a computed import()");
  assert.deepEqual(circles(graph), [["/r/a.ts", "/r/b.ts", "/r/sub/c.ts"]]);
});

test("no import circle in src/ and providers/", () => {
  const files = [...tsFiles(join(REPO, "src")), ...tsFiles(join(REPO, "providers"))];
  const graph = importGraph(files, (f) => readFileSync(f, "utf8"));
  const found = circles(graph).map((c) => c.map((f) => relative(REPO, f)).join(" <-> "));
  assert.deepEqual(found, [], `import circles:\n${found.join("\n")}`);
});
