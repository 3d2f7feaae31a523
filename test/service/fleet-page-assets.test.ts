/**
 * The fleet page without a browser: the embedded assets are current with their sources
 * (scripts/fleet-page.ts), the browser code type-checks against the DOM types, the routes
 * answer with the page CSP, content hashes, caching and ETags while the API keeps
 * `default-src 'none'`, and the page's SSE parser (browser/sse.ts) reads the stream as the
 * WHATWG rules say, however it is cut into chunks. The page in Chromium: fleet-page.test.ts.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { promisify } from "node:util";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { fleetPageModule, GENERATED } from "../../scripts/fleet-page.ts";
import { buildApp } from "../../src/service/app.ts";
import { type SseEvent, SseParser } from "../../src/service/fleet-page/browser/sse.ts";
import { CSP, PAGE_CSP } from "../../src/service/plugins/http-edge.ts";
import { REPO } from "../fetcher/helpers.ts";
import { appConfig } from "./app-config.ts";

const run = promisify(execFile);

describe("embedded assets", () => {
  test("assets.generated.ts is current with page.html, style.css and browser/ (node scripts/fleet-page.ts)", async () => {
    assert.equal(readFileSync(GENERATED, "utf8"), await fleetPageModule());
  });

  test("the browser code type-checks with the DOM types (its own tsconfig)", async () => {
    const tsc = join(REPO, "node_modules/.bin/tsc");
    await run(tsc, ["-p", join(REPO, "src/service/fleet-page/browser/tsconfig.json")], { cwd: REPO });
  });
});

describe("routes", () => {
  const app = buildApp({ logger: false, store: new MemoryStore(), config: appConfig() });

  test("GET / is the page with the page CSP, revalidated by its ETag; it has nothing inline", async () => {
    const res = await app.inject({ url: "/" });
    assert.equal(res.statusCode, 200);
    assert.match(res.headers["content-type"] as string, /^text\/html; charset=utf-8/);
    assert.equal(res.headers["content-security-policy"], PAGE_CSP);
    assert.equal(res.headers["cache-control"], "no-cache");
    assert.equal(res.headers["x-content-type-options"], "nosniff");
    assert.doesNotMatch(res.body, /<script(?![^>]*\bsrc=)[^>]*>/, "no inline script");
    assert.doesNotMatch(res.body, /<style|\sstyle=|\son[a-z]+=/i, "no inline style or handler");
    assert.doesNotMatch(res.body, /(src|href)="(https?:)?\/\//, "nothing from elsewhere");
    const again = await app.inject({ url: "/", headers: { "if-none-match": res.headers.etag as string } });
    assert.equal(again.statusCode, 304);
    assert.equal(again.body, "");
  });

  test("GET /ui/<name>: hashed names, cached for a year, 404 for anything else", async () => {
    const page = (await app.inject({ url: "/" })).body;
    const names = [...page.matchAll(/"ui\/([^"]+)"/g)].map((m) => m[1] as string);
    assert.equal(names.length, 2, page);
    for (const name of names) {
      assert.match(name, /^(app|style)-[0-9a-f]{16}\.(js|css)$/);
      const res = await app.inject({ url: `/ui/${name}` });
      assert.equal(res.statusCode, 200, name);
      assert.equal(res.headers["cache-control"], "public, max-age=31536000, immutable");
      assert.equal(res.headers["content-security-policy"], PAGE_CSP);
      assert.match(
        res.headers["content-type"] as string,
        name.endsWith(".js") ? /^text\/javascript/ : /^text\/css/,
      );
      assert.ok(res.body.length > 100);
    }
    for (const bad of ["nope.js", "toString", "__proto__", "..%2fapp.ts"]) {
      const res = await app.inject({ url: `/ui/${bad}` });
      assert.equal(res.statusCode, 404, bad);
      assert.equal(res.json().code, "NOT_FOUND");
    }
  });

  test("the API and unknown paths keep default-src 'none'", async () => {
    for (const url of ["/healthz", "/v1/machines", "/nope", "/ui"]) {
      const res = await app.inject({ url });
      assert.equal(res.headers["content-security-policy"], CSP, url);
    }
  });
});

describe("SSE parser", () => {
  const STREAM =
    "retry: 2000\n: connected\n\n" +
    'id: 1\nevent: status\ndata: {"a":1}\n\n' +
    ": heartbeat 123\n\n" +
    "id: 2\r\nevent: status\r\ndata: line one\r\ndata:line two\r\n\r\n" +
    "id: 3\revent: other\rdata\r\r" +
    "event: nothing\n\n" +
    "id: bad\u0000id\ndata: x\n\n";
  const WANT: SseEvent[] = [
    { type: "status", data: '{"a":1}', lastEventId: "1" },
    { type: "status", data: "line one\nline two", lastEventId: "2" },
    { type: "other", data: "", lastEventId: "3" },
    { type: "message", data: "x", lastEventId: "3" },
  ];

  function parse(chunks: readonly string[]) {
    const events: SseEvent[] = [];
    const parser = new SseParser((e) => events.push(e));
    for (const c of chunks) parser.push(c);
    return { events, parser };
  }

  test("whole: events, ids, retry, comments, CRLF and CR line ends, a NUL id ignored", () => {
    const { events, parser } = parse([STREAM]);
    assert.deepEqual(events, WANT);
    assert.equal(parser.lastEventId, "3");
    assert.equal(parser.retryMs, 2000);
  });

  test("cut at every position into two chunks, and one character at a time: the same events", () => {
    for (let i = 0; i <= STREAM.length; i++) {
      assert.deepEqual(parse([STREAM.slice(0, i), STREAM.slice(i)]).events, WANT, `cut at ${i}`);
    }
    assert.deepEqual(parse([...STREAM]).events, WANT);
  });

  test("an event is dispatched only at its blank line", () => {
    const { events } = parse(["id: 9\ndata: partial"]);
    assert.deepEqual(events, []);
  });
});
