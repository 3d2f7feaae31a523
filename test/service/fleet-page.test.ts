/**
 * The fleet page (src/service/fleet-page/, docs/api.md "The fleet page") in real headless
 * Chromium (the chromium peer) driven by puppeteer-core, against a real service (buildApp on
 * a socket, file store): the page renders (screenshot in test-artifacts/fleet-page.png), a
 * status:read token shows the counts, publishes and status reports made through the API
 * appear without a reload, a hostile reason string renders as text, wrong or under-scoped
 * credentials are refused and show no data, every request stays on the origin and the page's
 * CSP is sent and never violated.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { Page } from "puppeteer-core";
import { createFileStore } from "../../providers/stores/file.ts";
import { PAGE_CSP } from "../../src/service/plugins/http-edge.ts";
import { REPO } from "../fetcher/helpers.ts";
import {
  type FleetBrowser,
  type FleetService,
  launchBrowser,
  PUBLISHER,
  READER,
  signIn as signInWith,
  startService,
  WAIT,
} from "./fleet-page-harness.ts";

// The callbacks handed to page.evaluate and friends run in the page; these are the DOM names
// they use (the root tsconfig has no DOM types; module-local declarations, not globals).
interface PageElement {
  readonly textContent: string | null;
  getAttribute(name: string): string | null;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  getElementById(id: string): PageElement | null;
};
declare const window: object;

const HOSTILE = `<img src=x onerror="window.__pwned=1"> disk </td><script>window.__pwned=2</script>`;

let service: FleetService;
let chromium: FleetBrowser;
let page: Page;
let url: string;
let dir: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "bootseal-fleet-page-"));
  service = await startService(createFileStore(join(dir, "store")));
  url = service.url;
  chromium = await launchBrowser(url, dir);
  page = chromium.page;
});

after(async () => {
  await chromium?.browser.close();
  await service?.app.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const publish = (name: string) => service.publish("fleet", name);
const report = (name: string, token: string, body: Record<string, unknown>) =>
  service.report("fleet", name, token, body);
const signIn = (token: string) => signInWith(page, token);

/** The text of the count of `phase` (the DOM, read in the page). */
const countOf = (phase: string) =>
  page.$eval(`#counts li[data-phase="${phase}"] .n`, (n) => n.textContent ?? "");

async function waitForCount(phase: string, n: number): Promise<void> {
  await page.waitForFunction(
    (p, want) => document.querySelector(`#counts li[data-phase="${p}"] .n`)?.textContent === String(want),
    WAIT,
    phase,
    n,
  );
}

async function waitForRowPhase(machine: string, phase: string): Promise<void> {
  await page.waitForFunction(
    (m, p) =>
      document.querySelector(`#machines tr[data-machine="${m}"] td.phase`)?.getAttribute("data-phase") === p,
    WAIT,
    machine,
    phase,
  );
}

test("the page renders with its CSP; a status:read token shows the counts; the stream goes live", async () => {
  await publish("web-1");
  const response = await page.goto(`${url}/`, { waitUntil: "load" });
  assert.ok(response);
  assert.equal(response.status(), 200);
  assert.equal(response.headers()["content-security-policy"], PAGE_CSP);
  assert.equal(await page.title(), "bootseal fleet");
  await signIn(READER);
  await waitForCount("published", 1);
  assert.equal(await countOf("failed"), "0");
  await page.waitForSelector('#live[data-live="true"]', WAIT);
  await page.waitForSelector('#machines tr[data-machine="fleet/web-1"]', WAIT);
  assert.equal(
    await page.evaluate(() => sessionStorage.getItem("bootseal.fleet.token")),
    READER,
    "kept in sessionStorage",
  );
  assert.equal(await page.evaluate(() => localStorage.length), 0, "nothing in localStorage");
});

test("a publish and status reports made through the API appear without a reload", async () => {
  const navigations: string[] = [];
  const onNav = (f: { url(): string }) => navigations.push(f.url());
  page.on("framenavigated", onNav);

  const token = await publish("web-2");
  await page.waitForSelector('#machines tr[data-machine="fleet/web-2"]', WAIT);
  await waitForCount("published", 2);
  await report("web-2", token, { phase: "fetching" });
  // Held by the service (202) and not yet stored: the event still shows it, marked held.
  await waitForRowPhase("fleet/web-2", "fetching");
  for (const phase of ["decrypted", "written", "running"]) await report("web-2", token, { phase });
  await report("web-2", token, { phase: "succeeded", exitCode: 0, message: "bootstrapped" });
  await waitForRowPhase("fleet/web-2", "succeeded");
  await waitForCount("succeeded", 1);

  const bad = await publish("db-1");
  await report("db-1", bad, { phase: "fetching" });
  await report("db-1", bad, { phase: "failed", exitCode: 3, message: HOSTILE, attempt: 2 });
  await waitForRowPhase("fleet/db-1", "failed");
  await waitForCount("failed", 1);
  await waitForCount("published", 1);

  // The history: reason and exit code, the hostile message as text.
  // Clicked inside the page in one step: a re-render between finding the button and clicking
  // it (a late event for the other machine) would detach a handle held from outside.
  await page.evaluate(() =>
    (
      document.querySelector('#machines button[data-machine="fleet/db-1"]') as { click(): void } | null
    )?.click(),
  );
  await page.waitForFunction(
    () => document.querySelector('#detail tr[data-phase="failed"] td.exit')?.textContent === "3",
    WAIT,
  );
  const shown = await page.$eval('#detail tr[data-phase="failed"] td.message', (n) => n.textContent);
  assert.equal(shown, HOSTILE, "the message is shown as sent, as text");
  assert.equal(await page.$$eval("#detail img, #detail script", (n) => n.length), 0, "no element from data");
  assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
  const phases = await page.$$eval("#detail tbody tr", (rows) =>
    rows.map((r) => r.getAttribute("data-phase")),
  );
  assert.deepEqual(phases, ["failed", "fetching", "published"]);

  // The filter: phase failed shows db-1 only.
  await page.select("#filter-phase", "failed");
  const listed = await page.$$eval("#machines tr", (rows) => rows.map((r) => r.getAttribute("data-machine")));
  assert.deepEqual(listed, ["fleet/db-1"]);
  await page.select("#filter-phase", "");

  mkdirSync(join(REPO, "test-artifacts"), { recursive: true });
  await page.screenshot({ path: join(REPO, "test-artifacts/fleet-page.png"), fullPage: true });
  page.off("framenavigated", onNav);
  assert.deepEqual(navigations, [], "no reload");
});

test("a wrong credential and one without status:read are refused: message shown, no data, token cleared", async () => {
  for (const token of ["not-a-known-token-0123456789abcdefghij", PUBLISHER]) {
    await page.evaluate(() => sessionStorage.clear());
    await page.goto(`${url}/`, { waitUntil: "load" });
    await signIn(token);
    await page.waitForFunction(
      () => /^refused/.test(document.getElementById("message")?.textContent ?? ""),
      WAIT,
    );
    assert.equal(
      await page.$eval("#fleet", (n) => (n as unknown as { hidden: boolean }).hidden),
      true,
      token,
    );
    assert.equal(await page.$$eval("#machines tr", (n) => n.length), 0, token);
    assert.equal(await page.$$eval("#counts li", (n) => n.length), 0, token);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0, token);
  }
});

test("every request stayed on the origin; no CSP violation", async () => {
  const { requests, violations, consoleErrors } = chromium;
  assert.ok(requests.length > 0);
  const foreign = requests.filter((r) => new URL(r).origin !== url && !r.startsWith("data:"));
  assert.deepEqual(foreign, []);
  assert.deepEqual(violations, []);
  assert.deepEqual(
    consoleErrors.filter((m) => /Content Security Policy|Refused to/i.test(m)),
    [],
  );
});
