/**
 * What the fleet page's Chromium tests share: a real service (buildApp on a socket) with an
 * admin, a status:read and a configs:write controller, its API as the tests call it, and a
 * headless Chromium (the chromium peer, puppeteer-core) whose page may reach only the service,
 * recording every request, console error and CSP violation.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import type { FastifyInstance } from "fastify";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import type { ObjectStore } from "../../providers/stores/object-store.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { peer } from "../helpers/peers.ts";
import { appConfig } from "./app-config.ts";

export const ADMIN = "fleet-admin-token-0123456789abcdefghijkl";
export const READER = "fleet-reader-token-0123456789abcdefghijk";
export const PUBLISHER = "fleet-publisher-token-0123456789abcdefgh";
/** Generous: a loaded machine; the page waits on the DOM, never on a clock. */
export const WAIT = { timeout: 120_000 };

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

export interface FleetService {
  readonly app: FastifyInstance;
  readonly url: string;
  /** A call to the API; fails the test on an answer of 300 or more. */
  api(method: string, path: string, token: string, body?: unknown): Promise<Record<string, unknown>>;
  /** Publishes a config for `ns/name` (with the publish's query, if any); its bootstrap token. */
  publish(ns: string, name: string, query?: string): Promise<string>;
  /** A machine's status report, with its bootstrap token. */
  report(ns: string, name: string, token: string, body: Record<string, unknown>): Promise<unknown>;
}

export async function startService(store: ObjectStore): Promise<FleetService> {
  const recipient = await identityToRecipient(await generateX25519Identity());
  const app = buildApp({
    logger: false,
    store,
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [
        { name: "admin", tokenSha256: sha(ADMIN), scopes: ["admin"] },
        { name: "reader", tokenSha256: sha(READER), scopes: ["status:read"] },
        { name: "publisher", tokenSha256: sha(PUBLISHER), scopes: ["configs:write"] },
      ],
      trustProxy: false,
    }),
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  assert.ok(address && typeof address === "object");
  const url = `http://127.0.0.1:${address.port}`;

  async function api(method: string, path: string, token: string, body?: unknown) {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined
          ? {}
          : typeof body === "string"
            ? { "content-type": "application/octet-stream" }
            : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
    });
    const text = await res.text();
    assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${text}`);
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  }
  return {
    app,
    url,
    api,
    publish: async (ns, name, query = "") =>
      (await api("PUT", `/v1/machines/${ns}/${name}/config${query}`, ADMIN, "payload: not a secret\n"))
        .bootstrapToken as string,
    report: (ns, name, token, body) => api("POST", `/v1/machines/${ns}/${name}/status`, token, body),
  };
}

export interface FleetBrowser {
  readonly browser: Browser;
  readonly page: Page;
  /** Every URL the page asked for. */
  readonly requests: string[];
  readonly consoleErrors: string[];
  /** `<directive> <blocked URI>` of every CSP violation any document reported. */
  readonly violations: string[];
}

// The callbacks handed to page.evaluate and friends run in the page; these are the DOM names
// they use (the root tsconfig has no DOM types; module-local declarations, not globals).
declare const document: {
  addEventListener(
    type: string,
    listener: (e: { violatedDirective: string; blockedURI: string }) => void,
  ): void;
};
declare const window: object;

/** Headless Chromium with one page that may reach only `origin` (and data: URLs). */
export async function launchBrowser(origin: string, dir: string): Promise<FleetBrowser> {
  const browser = await puppeteer.launch({
    executablePath: peer("CHROMIUM_BIN"),
    args: ["--no-sandbox", "--headless=new", "--disable-gpu", "--no-first-run"],
    headless: true,
    userDataDir: join(dir, "chromium"),
    // Generous: 2 shared cores can be busy for minutes.
    timeout: 180_000,
    protocolTimeout: 180_000,
  });
  const page = await browser.newPage();
  page.setDefaultTimeout(WAIT.timeout);
  await page.setViewport({ width: 1280, height: 900 });
  await page.setRequestInterception(true);
  const out: FleetBrowser = { browser, page, requests: [], consoleErrors: [], violations: [] };
  page.on("request", (request) => {
    out.requests.push(request.url());
    if (new URL(request.url()).origin === origin || request.url().startsWith("data:")) {
      void request.continue();
    } else {
      void request.abort();
    }
  });
  page.on("console", (message) => {
    if (message.type() === "error") out.consoleErrors.push(message.text());
  });
  // Every document reports its CSP violations here (a CDP binding and a script injected
  // before the page's own: neither is subject to the page's CSP).
  await page.exposeFunction("__cspViolation", (v: string) => {
    out.violations.push(v);
  });
  await page.evaluateOnNewDocument(() => {
    const report = (window as unknown as { __cspViolation(v: string): void }).__cspViolation;
    document.addEventListener("securitypolicyviolation", (e) => {
      report(`${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  return out;
}

/** Types the token into the sign-in form and submits it. */
export async function signIn(page: Page, token: string): Promise<void> {
  await page.waitForSelector("#signin-form", { visible: true, ...WAIT });
  await page.type("#token", token);
  await page.waitForSelector("#signin-form button[type=submit]", { visible: true, ...WAIT });
  await page.click("#signin-form button[type=submit]");
}
