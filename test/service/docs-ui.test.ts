/**
 * Swagger UI at /docs in headless Chromium (the peer): it renders every operation of the
 * document under DOCS_CSP with no Content-Security-Policy violation, and every request the
 * page makes stays on the service's own origin (nothing from a CDN). The screenshot goes to a
 * temporary directory (its path in the test's diagnostics).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { FastifyInstance } from "fastify";
import puppeteer, { type Browser } from "puppeteer-core";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { buildApp } from "../../src/service/app.ts";
import { DOCS_CSP } from "../../src/service/plugins/http-edge.ts";
import { peer } from "../helpers/peers.ts";
import { appConfig } from "./app-config.ts";

let app: FastifyInstance;
let base: string;
let browser: Browser;
const work = mkdtempSync(join(tmpdir(), "bootseal-docs-ui-"));
const profile = mkdtempSync(join(tmpdir(), "bootseal-docs-ui-profile-"));

before(async () => {
  app = buildApp({ logger: false, store: new MemoryStore(), config: appConfig() });
  base = await app.listen({ host: "127.0.0.1", port: 0 });
  browser = await puppeteer.launch({
    executablePath: peer("CHROMIUM_BIN"),
    args: ["--no-sandbox", "--headless=new", "--disable-gpu", `--user-data-dir=${profile}`],
  });
});
after(async () => {
  await browser?.close();
  await app?.close();
  rmSync(profile, { recursive: true, force: true });
});

test("Swagger UI renders every operation under DOCS_CSP: no violation, nothing external", async (t) => {
  const page = await browser.newPage();
  const violations: string[] = [];
  const requests: string[] = [];
  await page.exposeFunction("reportViolation", (v: string) => violations.push(v));
  // The page's own listener (a string: it runs in the browser, not here).
  await page.evaluateOnNewDocument(`document.addEventListener("securitypolicyviolation", (e) =>
    reportViolation(e.violatedDirective + " " + e.blockedURI + " " + e.sourceFile + ":" + e.lineNumber));`);
  page.on("console", (m) => {
    if (/Content Security Policy/.test(m.text())) violations.push(m.text());
  });
  page.on("request", (r) => requests.push(r.url()));

  const answer = await page.goto(`${base}/docs`, { waitUntil: "networkidle0" });
  assert.equal(answer?.status(), 200);
  assert.equal(answer?.headers()["content-security-policy"], DOCS_CSP);
  await page.waitForSelector(".opblock-summary-operation-id", { timeout: 30_000 });
  const shown = await page.$$eval(".opblock-summary-operation-id", (els) =>
    els.map((e) => e.textContent?.trim()),
  );
  const spec = (await (await fetch(`${base}/docs/openapi.json`)).json()) as {
    paths: Record<string, Record<string, { operationId: string }>>;
  };
  const ids = Object.values(spec.paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
  assert.deepEqual([...shown].sort(), [...ids].sort());

  const shot = join(work, "docs.png");
  await page.screenshot({ path: shot });
  t.diagnostic(`screenshot: ${shot}`);

  assert.deepEqual(violations, []);
  const external = requests.filter((u) => !u.startsWith(`${base}/`) && !u.startsWith("data:"));
  assert.deepEqual(external, []);
  assert.ok(requests.includes(`${base}/docs/static/swagger-ui-bundle.js`), requests.join("\n"));
  await page.close();
});

test("a page that breaks DOCS_CSP is reported (the check can fail)", async () => {
  const page = await browser.newPage();
  const violations: string[] = [];
  page.on("console", (m) => {
    if (/Content Security Policy/.test(m.text())) violations.push(m.text());
  });
  // The Swagger UI page with an inline script added: the same CSP must refuse it.
  await page.setRequestInterception(true);
  page.on("request", (r) => {
    if (r.url() === `${base}/docs`) {
      void fetch(`${base}/docs`).then(async (res) =>
        r.respond({
          status: 200,
          headers: { "content-type": "text/html", "content-security-policy": DOCS_CSP },
          body: (await res.text()).replace("<body>", "<body><script>document.title='x'</script>"),
        }),
      );
    } else void r.continue();
  });
  await page.goto(`${base}/docs`, { waitUntil: "networkidle0" });
  assert.ok(violations.length > 0, "the inline script is refused");
  await page.close();
});
