/**
 * The HTTP edge on a real listening server, over raw sockets (issue #10 M2, L7 and the smaller
 * items): slow clients get 408 and are closed, connections over a cap are refused, every
 * malformed request gets `{code, message}`, every answer carries the security headers, TLS
 * offers forward-secret suites only. Timeouts are configured small (1 s) and every wait is
 * bounded by a guard timer.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect as netConnect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connect as tlsConnect } from "node:tls";
import type { FastifyInstance } from "fastify";
import { openStore } from "../../providers/stores/index.ts";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { validateServiceConfig } from "../../src/config/service-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { prepareEmbeddedDefault } from "../../src/service/embedded-default.ts";
import { isLoopbackHost, startServer } from "../../src/service/server.ts";
import { stopChild } from "../helpers/child.ts";
import { whenReady } from "../helpers/until.ts";
import { appConfig } from "./app-config.ts";
import { MAIN_TS } from "./serve-harness.ts";

const TOKEN = randomBytes(32).toString("base64url");
const controllers = [
  { name: "ops", tokenSha256: createHash("sha256").update(TOKEN).digest("hex"), scopes: ["admin" as const] },
];
const GUARD_MS = 10_000;

const LIMITS = {
  bodyBytes: 1024 * 1024,
  headersTimeoutMs: 1000,
  requestTimeoutMs: 1000,
  idleTimeoutMs: 1000,
  maxConnections: 0,
  maxConnectionsPerAddress: 0,
};

async function listen(
  limits: Partial<typeof LIMITS> = {},
  https?: { cert: Buffer; key: Buffer },
): Promise<{ app: FastifyInstance; port: number }> {
  const app = buildApp({
    store: new MemoryStore(),
    logger: false,
    config: appConfig({ controllers, limits: { ...LIMITS, ...limits } }),
    ...(https ? { https } : {}),
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  assert.ok(address && typeof address === "object");
  return { app, port: address.port };
}

interface RawResult {
  readonly text: string;
  /** The server closed the connection (rather than the guard timer). */
  readonly closed: boolean;
}

/** Writes `chunks` (strings, written at once) and reads until the server closes or the guard fires. */
function exchange(port: number, request: string | Buffer, keepOpen = false): Promise<RawResult> {
  return new Promise((resolve, reject) => {
    const socket = netConnect(port, "127.0.0.1");
    let text = "";
    const guard = setTimeout(() => {
      socket.destroy();
      resolve({ text, closed: false });
    }, GUARD_MS);
    socket.on("data", (c: Buffer) => {
      text += c.toString("latin1");
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "ECONNRESET" || err.code === "EPIPE") return;
      clearTimeout(guard);
      reject(err);
    });
    socket.on("close", () => {
      clearTimeout(guard);
      resolve({ text, closed: true });
    });
    socket.write(request);
    if (!keepOpen) socket.end();
  });
}

function parse(text: string): { status: number; headers: Map<string, string>; body: string } {
  const end = text.indexOf("\r\n\r\n");
  assert.ok(end > 0, `no HTTP answer: ${JSON.stringify(text.slice(0, 200))}`);
  const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
  const headers = new Map<string, string>();
  for (const line of lines) {
    const i = line.indexOf(":");
    headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
  }
  return { status: Number(statusLine?.split(" ")[1]), headers, body: text.slice(end + 4) };
}

function assertError(text: string, status: number, code?: string): void {
  const answer = parse(text);
  assert.equal(answer.status, status, text);
  assert.match(answer.headers.get("content-type") ?? "", /^application\/json/);
  const body = JSON.parse(answer.body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ["code", "message"], answer.body);
  assert.equal(typeof body.message, "string");
  if (code) assert.equal(body.code, code);
  assert.equal(answer.headers.get("x-content-type-options"), "nosniff", text);
  assert.equal(answer.headers.get("referrer-policy"), "no-referrer", text);
  assert.doesNotMatch(answer.body, /statusCode|stack|banana|Bad Header/);
}

describe("timeouts", () => {
  let app: FastifyInstance;
  let port: number;
  before(async () => {
    ({ app, port } = await listen());
  });
  after(() => app.close());

  test("a client that never finishes its headers gets 408 and is closed", async () => {
    const r = await exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ", true);
    assert.ok(r.closed, "the server closed the connection");
    assertError(r.text, 408, "REQUEST_TIMEOUT");
  });

  test("an authenticated PUT that sends 10 of 1,000 bytes gets 408 and is closed", async () => {
    const head =
      "PUT /v1/machines/default/web-1/config HTTP/1.1\r\nHost: x\r\n" +
      `Authorization: Bearer ${TOKEN}\r\nContent-Type: application/yaml\r\nContent-Length: 1000\r\n\r\n`;
    const r = await exchange(port, `${head}a: 123456\n`, true);
    assert.ok(r.closed, "the server closed the connection");
    assertError(r.text, 408, "REQUEST_TIMEOUT");
  });

  test("a connection that sends nothing is closed", async () => {
    const r = await exchange(port, "", true);
    assert.ok(r.closed, "the server closed the connection");
  });

  test("an idle keep-alive connection is closed after a complete request", async () => {
    const r = await exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", true);
    assert.ok(r.closed, "the server closed the connection");
    assert.equal(parse(r.text).status, 200);
  });
});

function openIdle(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = netConnect(port, "127.0.0.1", () => resolve(s));
    s.on("error", reject);
  });
}

async function healthy(port: number): Promise<boolean> {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const r = await exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if (r.text.startsWith("HTTP/1.1 200")) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return false;
}

describe("connection caps", () => {
  test("connections over the per-address cap are answered 503 and closed; after the flood, requests work", async () => {
    const { app, port } = await listen({
      maxConnectionsPerAddress: 5,
      headersTimeoutMs: 5000,
      requestTimeoutMs: 5000,
    });
    try {
      const held = await Promise.all(Array.from({ length: 5 }, () => openIdle(port)));
      const excess = await Promise.all(
        Array.from({ length: 10 }, () => exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")),
      );
      for (const r of excess) {
        assert.ok(r.closed);
        assertError(r.text, 503, "SERVICE_UNAVAILABLE");
      }
      for (const s of held) s.destroy();
      assert.ok(await healthy(port), "a request works once the flood has left");
    } finally {
      await app.close();
    }
  });

  test("connections over the total cap are refused", async () => {
    const { app, port } = await listen({ maxConnections: 3, headersTimeoutMs: 5000, requestTimeoutMs: 5000 });
    try {
      const held = await Promise.all(Array.from({ length: 3 }, () => openIdle(port)));
      const r = await exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
      assertError(r.text, 503, "SERVICE_UNAVAILABLE");
      for (const s of held) s.destroy();
      assert.ok(await healthy(port));
    } finally {
      await app.close();
    }
  });

  test("the balancers named in trustProxy are not counted per address", async () => {
    const app = buildApp({
      store: new MemoryStore(),
      logger: false,
      config: appConfig({
        controllers,
        trustProxy: ["127.0.0.0/8"],
        limits: { ...LIMITS, maxConnectionsPerAddress: 2, headersTimeoutMs: 5000, requestTimeoutMs: 5000 },
      }),
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const port = (app.server.address() as { port: number }).port;
      const held = await Promise.all(Array.from({ length: 4 }, () => openIdle(port)));
      const r = await exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      assert.equal(parse(r.text).status, 200);
      for (const s of held) s.destroy();
    } finally {
      await app.close();
    }
  });
});

describe("malformed requests get {code, message}", () => {
  let app: FastifyInstance;
  let port: number;
  before(async () => {
    ({ app, port } = await listen({ headersTimeoutMs: 5000, requestTimeoutMs: 5000 }));
  });
  after(() => app.close());

  const cases: [string, string, number, string?][] = [
    ["bad request line", "GARBAGE\r\n\r\n", 400, "BAD_INPUT"],
    ["bad HTTP version", "GET / HTTP/9.9\r\nHost: x\r\n\r\n", 400, "BAD_INPUT"],
    ["header syntax", "GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n", 400, "BAD_INPUT"],
    ["header without colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nbanana\r\n\r\n", 400, "BAD_INPUT"],
    ["unknown method", "BANANA /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400, "BAD_INPUT"],
    [
      "head too large",
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`,
      431,
      "TOO_LARGE",
    ],
    [
      "bad Content-Length",
      "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: banana\r\n\r\n",
      400,
      "BAD_INPUT",
    ],
    [
      "negative Content-Length",
      "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
      400,
      "BAD_INPUT",
    ],
    [
      "two different Content-Lengths",
      "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
      400,
      "BAD_INPUT",
    ],
    [
      "Content-Length with chunked",
      "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      400,
      "BAD_INPUT",
    ],
    [
      "bad chunk size",
      "POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      400,
      "BAD_INPUT",
    ],
    ["HTTP/1.1 without Host", "GET /healthz HTTP/1.1\r\n\r\n", 400, "BAD_INPUT"],
    ["Expect: banana", "GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: banana\r\n\r\n", 417, "BAD_INPUT"],
    ["malformed URL escape", "GET /v1/machines/%zz/web/config HTTP/1.1\r\nHost: x\r\n\r\n", 400, "BAD_INPUT"],
    ["unknown route", "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 404, "NOT_FOUND"],
    ["known method, no route", "PROPFIND /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 404, "NOT_FOUND"],
    [
      "duplicate Authorization",
      `GET /v1/machines HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nAuthorization: Bearer banana\r\n\r\n`,
      400,
      "BAD_INPUT",
    ],
    ["duplicate Host", "GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, "BAD_INPUT"],
  ];
  for (const [name, request, status, code] of cases) {
    test(name, async () => {
      const r = await exchange(port, `${request}`);
      assertError(r.text, status, code);
    });
  }

  test("a single Authorization header still works", async () => {
    const r = await exchange(
      port,
      `GET /v1/machines HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`,
    );
    assert.equal(parse(r.text).status, 200);
  });
});

describe("security headers", () => {
  let app: FastifyInstance;
  let port: number;
  before(async () => {
    ({ app, port } = await listen({ headersTimeoutMs: 5000, requestTimeoutMs: 5000 }));
  });
  after(() => app.close());

  const get = async (path: string, extra = "") =>
    parse(
      (await exchange(port, `GET ${path} HTTP/1.1\r\nHost: x\r\n${extra}Connection: close\r\n\r\n`)).text,
    );

  test("every answer is nosniff, no-referrer, CSP; /v1/ answers are no-store", async () => {
    for (const [path, extra] of [
      ["/healthz", ""],
      ["/docs", ""],
      ["/nope", ""],
      ["/v1/machines", `Authorization: Bearer ${TOKEN}\r\n`],
      ["/v1/machines", ""],
      ["/v1/machines/default/web/status", `Authorization: Bearer ${TOKEN}\r\n`],
    ] as const) {
      const a = await get(path, extra);
      assert.equal(a.headers.get("x-content-type-options"), "nosniff", path);
      assert.equal(a.headers.get("referrer-policy"), "no-referrer", path);
      assert.match(a.headers.get("content-security-policy") ?? "", /default-src 'none'/, path);
      assert.equal(a.headers.has("strict-transport-security"), false, "no HSTS without TLS");
      if (path.startsWith("/v1/")) assert.equal(a.headers.get("cache-control"), "no-store", path);
    }
    assert.match((await get("/docs")).headers.get("content-type") ?? "", /^text\/html/);
  });
});

describe("TLS", () => {
  let dir: string;
  let app: FastifyInstance;
  let port: number;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bootseal-edge-tls-"));
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "cert.pem",
        "-subj",
        "/CN=127.0.0.1",
        "-days",
        "1",
      ],
      { cwd: dir, stdio: "ignore" },
    );
    ({ app, port } = await listen(
      { headersTimeoutMs: 5000, requestTimeoutMs: 5000 },
      { cert: readFileSync(join(dir, "cert.pem")), key: readFileSync(join(dir, "key.pem")) },
    ));
  });
  after(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const handshake = (options: {
    ciphers?: string;
    maxVersion?: "TLSv1.2" | "TLSv1.3";
    minVersion?: "TLSv1" | "TLSv1.1";
  }) =>
    new Promise<{ ok: true; cipher: string; text: string } | { ok: false }>((resolve) => {
      const socket = tlsConnect({ host: "127.0.0.1", port, rejectUnauthorized: false, ...options }, () => {
        const cipher = socket.getCipher().name;
        let text = "";
        socket.on("data", (c: Buffer) => {
          text += c.toString("latin1");
        });
        socket.on("end", () => resolve({ ok: true, cipher, text }));
        socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      });
      socket.on("error", () => resolve({ ok: false }));
      setTimeout(() => {
        socket.destroy();
        resolve({ ok: false });
      }, GUARD_MS).unref();
    });

  test("a client offering only AES128-SHA (no forward secrecy) fails the handshake", async () => {
    assert.deepEqual(await handshake({ ciphers: "AES128-SHA", maxVersion: "TLSv1.2" }), { ok: false });
    assert.deepEqual(await handshake({ ciphers: "AES256-GCM-SHA384", maxVersion: "TLSv1.2" }), { ok: false });
  });

  test("a connection that never completes the TLS handshake is closed", async () => {
    const { app: slow, port: slowPort } = await listen(
      { headersTimeoutMs: 1000, requestTimeoutMs: 1000 },
      { cert: readFileSync(join(dir, "cert.pem")), key: readFileSync(join(dir, "key.pem")) },
    );
    try {
      const silent = await exchange(slowPort, "", true);
      assert.ok(silent.closed, "a silent connection is closed");
      const partial = await exchange(slowPort, Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]), true);
      assert.ok(partial.closed, "a partial ClientHello is closed");
    } finally {
      await slow.close();
    }
  });

  test("TLS 1.1 is refused", async () => {
    assert.deepEqual(
      await handshake({
        ciphers: "DEFAULT@SECLEVEL=0",
        minVersion: "TLSv1",
        maxVersion: "TLSv1.1" as "TLSv1.2",
      }),
      { ok: false },
    );
  });

  test("ECDHE suites on TLS 1.2, and TLS 1.3, work and carry HSTS", async () => {
    const r12 = await handshake({ ciphers: "ECDHE-RSA-AES128-GCM-SHA256", maxVersion: "TLSv1.2" });
    assert.ok(r12.ok);
    assert.equal(r12.cipher, "ECDHE-RSA-AES128-GCM-SHA256");
    const a = parse(r12.text);
    assert.equal(a.status, 200);
    assert.match(a.headers.get("strict-transport-security") ?? "", /max-age=\d+/);
    const r13 = await handshake({});
    assert.ok(r13.ok);
    assert.match(r13.cipher, /^TLS_/);
  });
});

describe("serve's surroundings", () => {
  test("loopback hosts are recognised; others get the plaintext warning", () => {
    for (const h of ["127.0.0.1", "127.1.2.3", "::1", "localhost", "[::1]"]) assert.ok(isLoopbackHost(h), h);
    for (const h of ["0.0.0.0", "::", "10.0.0.1", "example.com"]) assert.equal(isLoopbackHost(h), false, h);
  });

  test("a plaintext listener on a non-loopback address warns once; a loopback one does not", async () => {
    const root = mkdtempSync(join(tmpdir(), "bootseal-edge-warn-"));
    try {
      const config = (listen: string) =>
        validateServiceConfig({
          store: `file://${join(root, "store")}`,
          creation_rules: [{ age: "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p" }],
          controllers,
          listen,
          logLevel: "silent",
          audit: { path: "-" },
        });
      const open = await startServer(config("0.0.0.0:0"));
      try {
        assert.match(open.plaintextWarning ?? "", /without TLS on a non-loopback address/);
      } finally {
        await open.close();
      }
      const local = await startServer(config("127.0.0.1:0"));
      try {
        assert.equal(local.plaintextWarning, undefined);
      } finally {
        await local.close();
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("an embedded default under a directory with spaces opens its store", async () => {
    const root = mkdtempSync(join(tmpdir(), "bootseal edge "));
    try {
      const embedded = await prepareEmbeddedDefault(join(root, "a b", "data"));
      const store = openStore(embedded.storeUrl, {});
      await store.put("configs/default/web/x", Buffer.from("hello"), { unconditional: true });
      const back = await store.get("configs/default/web/x");
      assert.equal(Buffer.from(back?.body ?? []).toString(), "hello");
      assert.ok(readFileSync(join(root, "a b", "data", "store", "configs", "default", "web", "x")));
      validateServiceConfig({
        store: embedded.storeUrl,
        creation_rules: [{ age: embedded.ageRecipient }],
        controllers,
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test('`bootseal serve --data-dir "…/a b/data"` starts, warns nowhere on loopback, and answers', async () => {
    const root = mkdtempSync(join(tmpdir(), "bootseal-edge-serve-"));
    mkdirSync(join(root, "a b"));
    writeFileSync(join(root, "a b", ".keep"), "");
    const child = spawn(
      process.execPath,
      [MAIN_TS, "serve", "--data-dir", join(root, "a b", "data"), "--listen", "127.0.0.1:0"],
      { stdio: ["ignore", "pipe", "pipe"], cwd: root, env: { PATH: process.env.PATH ?? "" } },
    );
    let out = "";
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      out += c.toString();
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const guard = setTimeout(() => reject(new Error(`serve did not start: ${out}`)), 30_000);
        child.stderr.on("data", () => {
          const m = /listening on (http\S+)/.exec(out);
          if (m && out.includes("controller token:")) {
            clearTimeout(guard);
            resolve(m[1] as string);
          }
        });
        child.once("exit", (code) => {
          clearTimeout(guard);
          reject(new Error(`serve exited (${code}): ${out}`));
        });
      });
      assert.equal((await whenReady(url)).status, "ready");
      assert.doesNotMatch(out, /WARNING/);
    } finally {
      await stopChild(child);
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("configuration", () => {
  const minimal = {
    store: "file:///nonexistent",
    creation_rules: [{ age: "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p" }],
    controllers,
  };

  test("the edge limits have defaults and take durations", () => {
    const d = validateServiceConfig(minimal).limits;
    assert.deepEqual(
      [d.headersTimeoutMs, d.requestTimeoutMs, d.idleTimeoutMs, d.maxConnections, d.maxConnectionsPerAddress],
      [10_000, 60_000, 5000, 512, 64],
    );
    const c = validateServiceConfig({
      ...minimal,
      limits: { headersTimeout: "2s", requestTimeout: 90, idleTimeout: "1m", maxConnections: 0 },
    }).limits;
    assert.deepEqual(
      [c.headersTimeoutMs, c.requestTimeoutMs, c.idleTimeoutMs, c.maxConnections],
      [2000, 90_000, 60_000, 0],
    );
  });

  test("bad edge limits are USAGE errors naming the key", () => {
    for (const [limits, message] of [
      [{ headersTimeout: "soon" }, /^limits\.headersTimeout: must be a duration/],
      [{ requestTimeout: "10ms" }, /^limits\.requestTimeout: must be at least 1s/],
      [{ headersTimeout: "2m", requestTimeout: "1m" }, /^limits\.headersTimeout: must not be longer/],
      [{ maxConnectionsPerAddress: -1 }, /^limits\.maxConnectionsPerAddress/],
    ] as const) {
      assert.throws(
        () => validateServiceConfig({ ...minimal, limits }),
        (err: Error & { code?: string }) => {
          assert.equal(err.code, "USAGE");
          assert.match(err.message, message);
          return true;
        },
      );
    }
  });

  test("file:// store URLs are percent-decoded; bad escapes and encoded '..' are refused", () => {
    assert.equal(openStore("file:///tmp/a%20b/store", {}).url, "file:///tmp/a b/store");
    assert.throws(() => openStore("file:///tmp/%zz", {}), /malformed percent escape/);
    assert.throws(() => openStore("file:///tmp/%2e%2e/etc", {}), /'\.\.' is not allowed/);
    assert.throws(() => openStore("file:///tmp/a%00b", {}), /control characters/);
  });
});
