/**
 * Route unit tests: buildApp + inject() on a MemoryStore, no sockets. The real-process suite
 * (serve.test.ts) covers the same routes over HTTP against the file store and SeaweedFS.
 */
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync } from "node:crypto";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { parse as parseYaml } from "yaml";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { type AppConfig, buildApp } from "../../src/service/app.ts";
import { auditLoggerTo } from "../../src/service/plugins/audit.ts";
import { appConfig } from "./app-config.ts";

const identity = await generateX25519Identity();
const recipient = await identityToRecipient(identity);
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const READER = "controller-reader-token-0123456789abcdefghijk";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

function app(extra: Partial<AppConfig> = {}) {
  const audit = new PassThrough();
  const lines: string[] = [];
  audit.on("data", (c: Buffer) => lines.push(...c.toString().split("\n").filter(Boolean)));
  const instance = buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - path_regex: ^prod/\n    age: ${recipient}\n`, "t"),
      controllers: [
        { name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] },
        { name: "reader", tokenSha256: sha(READER), scopes: ["status:read", "configs:read"] },
      ],
      rateLimit: { authFailuresPerMinute: 5 },
      ...extra,
    }),
    audit: auditLoggerTo(audit),
  });
  return { app: instance, audit: lines };
}

const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

test("publish, fetch with the bootstrap token, report status, read it back", async () => {
  const { app: a, audit } = app();
  const payload = "#cloud-config\nruncmd: [echo CANARY-SECRET]\n";
  const put = await a.inject({
    method: "PUT",
    url: "/v1/machines/prod/worker-0/config",
    headers: { ...bearer(ADMIN), "content-type": "text/plain" },
    payload,
  });
  assert.equal(put.statusCode, 201, put.body);
  const pub = put.json() as { version: number; etag: string; sha256: string; bootstrapToken: string };
  assert.equal(pub.version, 1);
  assert.match(pub.bootstrapToken, /^bst\.prod\.worker-0\.[A-Za-z0-9_-]{43}$/);

  const get = await a.inject({
    method: "GET",
    url: "/v1/machines/prod/worker-0/config",
    headers: bearer(pub.bootstrapToken),
  });
  assert.equal(get.statusCode, 200, get.body);
  assert.equal(get.headers["content-type"], "application/sops+json");
  assert.equal(get.headers.etag, pub.etag);
  assert.equal(get.headers["x-bootseal-format"], "binary");
  assert.equal(createHash("sha256").update(get.rawPayload).digest("hex"), pub.sha256);
  assert.ok(!get.body.includes("CANARY"));

  const post = await a.inject({
    method: "POST",
    url: "/v1/machines/prod/worker-0/status",
    headers: bearer(pub.bootstrapToken),
    payload: { phase: "succeeded", message: "joined", exitCode: 0 },
  });
  assert.equal(post.statusCode, 200, post.body);
  const status = await a.inject({
    method: "GET",
    url: "/v1/machines/prod/worker-0/status",
    headers: bearer(READER),
  });
  assert.equal(status.statusCode, 200);
  const rec = status.json() as { phase: string; history: { phase: string }[] };
  assert.equal(rec.phase, "succeeded");
  assert.deepEqual(
    rec.history.map((h) => h.phase),
    ["published", "succeeded"],
  );
  const list = await a.inject({ method: "GET", url: "/v1/machines?namespace=prod", headers: bearer(READER) });
  assert.deepEqual(
    (list.json() as { items: { name: string }[] }).items.map((i) => i.name),
    ["worker-0"],
  );
  assert.ok(audit.some((l) => l.includes('"action":"publish"')));
  assert.ok(!audit.join("\n").includes(pub.bootstrapToken.split(".")[3]!));
  await a.close();
});

test("auth: 401 without or with a wrong token, 403 on scope and on another machine", async () => {
  const { app: a } = app();
  const url = "/v1/machines/prod/a/config";
  assert.equal((await a.inject({ method: "PUT", url, payload: "x" })).statusCode, 401);
  assert.equal(
    (await a.inject({ method: "PUT", url, headers: bearer("nope-nope"), payload: "x" })).statusCode,
    401,
  );
  const scope = await a.inject({ method: "PUT", url, headers: bearer(READER), payload: "x" });
  assert.equal(scope.statusCode, 403);
  assert.equal(scope.json().code, "FORBIDDEN");
  const put = await a.inject({ method: "PUT", url, headers: bearer(ADMIN), payload: "x" });
  const token = put.json().bootstrapToken as string;
  const other = await a.inject({ method: "GET", url: "/v1/machines/prod/b/config", headers: bearer(token) });
  assert.equal(other.statusCode, 403);
  const bad = await a.inject({
    method: "PUT",
    url: "/v1/machines/Prod/a/config",
    headers: bearer(ADMIN),
    payload: "x",
  });
  assert.equal(bad.statusCode, 400);
  assert.equal(bad.json().code, "BAD_INPUT");
  await a.close();
});

test("auth failures are rate limited per address with Retry-After", async () => {
  const { app: a } = app();
  const codes: number[] = [];
  for (let i = 0; i < 7; i++) {
    codes.push(
      (await a.inject({ method: "GET", url: "/v1/machines", headers: bearer(`wrong-${i}`) })).statusCode,
    );
  }
  assert.deepEqual(codes, [401, 401, 401, 401, 401, 429, 429]);
  const limited = await a.inject({ method: "GET", url: "/v1/machines", headers: bearer("wrong-7") });
  assert.equal(limited.statusCode, 429);
  assert.ok(Number(limited.headers["retry-after"]) > 0);
  // A valid credential from the same address is never refused.
  const valid = await a.inject({ method: "GET", url: "/v1/machines", headers: bearer(ADMIN) });
  assert.equal(valid.statusCode, 200);
  await a.close();
});

test("docs, metrics, healthz", async () => {
  const { app: a } = app();
  const spec = await a.inject({ method: "GET", url: "/docs/openapi.json" });
  assert.equal(spec.statusCode, 200);
  const paths = Object.keys((spec.json() as { paths: object }).paths);
  for (const p of [
    "/v1/machines/{ns}/{name}/config",
    "/v1/machines/{ns}/{name}/status",
    "/v1/machines",
    "/v1/events",
  ]) {
    assert.ok(paths.includes(p), `${p} in ${paths.join(",")}`);
  }
  const metrics = await a.inject({ method: "GET", url: "/metrics" });
  assert.match(metrics.body, /bootseal_http_requests_total/);
  assert.equal((await a.inject({ method: "GET", url: "/docs" })).statusCode, 200);
  await a.close();
});

test("trustProxy: the audit log sees the client behind a trusted proxy, and only then", async () => {
  const publish = async (a: ReturnType<typeof app>["app"]) =>
    a.inject({
      method: "PUT",
      url: "/v1/machines/prod/proxied/config",
      headers: { ...bearer(ADMIN), "content-type": "text/plain", "x-forwarded-for": "203.0.113.7" },
      payload: "x",
    });
  const trusted = app({ trustProxy: ["127.0.0.1"] });
  assert.equal((await publish(trusted.app)).statusCode, 201);
  assert.ok(
    trusted.audit.some((l) => l.includes('"source":"203.0.113.7"')),
    trusted.audit.join("\n"),
  );
  const direct = app();
  assert.equal((await publish(direct.app)).statusCode, 201);
  assert.ok(
    !direct.audit.some((l) => l.includes("203.0.113.7")),
    "a forged header is ignored without trustProxy",
  );
  await trusted.app.close();
  await direct.app.close();
});

// Two different executables, signed by two different keys, so that every field is told apart.
const pemOf = () => String(generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" }));
const LINUX = {
  url: "https://dl.example.com/bootseal/0.1.0/bootseal-linux-amd64",
  sha256: "1a".repeat(32),
  sha512: "3c".repeat(64),
  signatureUrl: "https://dl.example.com/bootseal/0.1.0/bootseal-linux-amd64.sig",
  publicKeyPem: pemOf(),
};
const WINDOWS = {
  url: "https://dl.example.com/bootseal/0.1.0/bootseal-windows-amd64.exe",
  sha256: "2b".repeat(32),
  signatureUrl: "https://dl.example.com/bootseal/0.1.0/bootseal-windows-amd64.exe.sig",
  publicKeyPem: pemOf(),
};
/** The base64 body of a PEM: what identifies the key whatever the line ends. */
const keyBody = (pem: string) => pem.replace(/-----[A-Z ]+-----|\s/g, "");

/** The text a stub carries, with Ignition's base64 data: URLs and cloud-init's YAML unpacked. */
function stubText(format: string, body: string): string {
  if (format === "ignition") {
    const doc = JSON.parse(body) as { storage: { files: { contents: { source: string } }[] } };
    const files = doc.storage.files.map((f) =>
      Buffer.from(f.contents.source.replace(/^data:;base64,/, ""), "base64").toString("utf8"),
    );
    return [body, ...files].join("\n");
  }
  if (format === "cloud-init") {
    const doc = parseYaml(body) as { write_files: { content: string }[] };
    return [body, ...doc.write_files.map((f) => f.content)].join("\n");
  }
  return body;
}

async function publishFor(a: ReturnType<typeof app>["app"], machine: string): Promise<string> {
  const put = await a.inject({
    method: "PUT",
    url: `/v1/machines/${machine}/config`,
    headers: { ...bearer(ADMIN), "content-type": "text/plain" },
    payload: "#cloud-config\n",
  });
  assert.equal(put.statusCode, 201, put.body);
  return (put.json() as { bootstrapToken: string }).bootstrapToken;
}

// POST: the explicit mint (GET renders a derived token again; test/service/userdata-stable.test.ts).
const userdata = (a: ReturnType<typeof app>["app"], machine: string, format: string) =>
  a.inject({
    method: "POST",
    url: `/v1/machines/${machine}/userdata?format=${format}`,
    headers: bearer(ADMIN),
  });

const fetchWith = async (a: ReturnType<typeof app>["app"], machine: string, token: string) =>
  (await a.inject({ method: "GET", url: `/v1/machines/${machine}/config`, headers: bearer(token) }))
    .statusCode;

test("userdata: powershell stubs carry the Windows artifact, cloud-init and ignition the Linux one", async () => {
  const { app: a } = app({ fetcherArtifact: LINUX, fetcherArtifactWindows: WINDOWS });
  await publishFor(a, "prod/mixed");
  const expected = { "cloud-init": LINUX, ignition: LINUX, powershell: WINDOWS } as const;
  for (const [format, want] of Object.entries(expected)) {
    const other = want === LINUX ? WINDOWS : LINUX;
    const res = await userdata(a, "prod/mixed", format);
    assert.equal(res.statusCode, 200, `${format}: ${res.body}`);
    const text = stubText(format, res.body);
    for (const value of [want.url, want.sha256, want.signatureUrl, keyBody(want.publicKeyPem)]) {
      assert.ok(text.includes(value), `${format} carries ${value}`);
    }
    for (const value of [other.url, other.sha256, other.signatureUrl, keyBody(other.publicKeyPem)]) {
      assert.ok(!text.includes(value), `${format} must not carry ${value}`);
    }
    // Not merely somewhere in the text: the values the stub pins are these.
    if (format === "powershell") {
      assert.ok(text.includes(`$ArtifactUrl = '${WINDOWS.url}'`), text);
      assert.ok(text.includes(`$ArtifactSha256 = '${WINDOWS.sha256}'`), text);
      assert.ok(text.includes(`$SignatureUrl = '${WINDOWS.signatureUrl}'`), text);
    } else {
      assert.ok(text.includes(`BOOTSEAL_ARTIFACT_URL='${LINUX.url}'`), text);
      assert.ok(text.includes(`BOOTSEAL_ARTIFACT_SHA256='${LINUX.sha256}'`), text);
      assert.ok(text.includes(`BOOTSEAL_ARTIFACT_SIGNATURE_URL='${LINUX.signatureUrl}'`), text);
    }
  }
  await a.close();
});

test("userdata: powershell without fetcherArtifactWindows is 501, and the current token keeps working", async () => {
  // Only the Linux artifact (a configuration from before fetcherArtifactWindows existed).
  const { app: a, audit } = app({ fetcherArtifact: LINUX });
  const token = await publishFor(a, "prod/win");
  const res = await userdata(a, "prod/win", "powershell");
  assert.equal(res.statusCode, 501, res.body);
  const err = res.json() as { code: string; message: string };
  assert.deepEqual(Object.keys(err).sort(), ["code", "message"]);
  assert.equal(err.code, "UNSUPPORTED");
  assert.match(err.message, /fetcherArtifactWindows/);
  assert.ok(!res.body.includes(LINUX.url) && !res.body.includes(LINUX.sha256), "never the Linux artifact");
  assert.equal(res.headers["x-bootseal-token-expires-at"], undefined);
  // Nothing was minted: the token from the publish still fetches.
  assert.equal(await fetchWith(a, "prod/win", token), 200);
  // The Linux formats still work with the same configuration, and they do replace the token.
  const linux = await userdata(a, "prod/win", "cloud-init");
  assert.equal(linux.statusCode, 200, linux.body);
  const fresh = /bst\.prod\.win\.[A-Za-z0-9_-]{43}/.exec(linux.body)?.[0];
  assert.ok(fresh);
  assert.equal(await fetchWith(a, "prod/win", token), 401);
  assert.equal(await fetchWith(a, "prod/win", fresh), 200);
  assert.ok(!audit.join("\n").includes(token.split(".")[3]!));
  await a.close();
});

test("userdata: cloud-init and ignition without fetcherArtifact are 501, never a Windows stub", async () => {
  const { app: a } = app({ fetcherArtifactWindows: WINDOWS });
  const token = await publishFor(a, "prod/lin");
  for (const format of ["cloud-init", "ignition"]) {
    const res = await userdata(a, "prod/lin", format);
    assert.equal(res.statusCode, 501, `${format}: ${res.body}`);
    const err = res.json() as { code: string; message: string };
    assert.equal(err.code, "UNSUPPORTED");
    assert.match(
      err.message,
      /need the Linux executable bootseal-linux-x64: build it with `npm run build:sea`.*fetcherArtifact$/,
    );
    assert.ok(!res.body.includes(WINDOWS.url));
  }
  assert.equal(await fetchWith(a, "prod/lin", token), 200, "the token was not replaced");
  const win = await userdata(a, "prod/lin", "powershell");
  assert.equal(win.statusCode, 200, win.body);
  assert.ok(win.body.includes(`$ArtifactUrl = '${WINDOWS.url}'`));
  // Neither artifact: 501 for every format, before the 404 for an unpublished machine.
  const { app: none } = app();
  for (const format of ["cloud-init", "ignition", "powershell"]) {
    const res = await userdata(none, "prod/nothing", format);
    assert.equal(res.statusCode, 501, `${format}: ${res.body}`);
    assert.equal((res.json() as { code: string }).code, "UNSUPPORTED");
  }
  await a.close();
  await none.close();
});

test("fetch outcomes are counted once validated: ok, not-modified and a refused token, never a malformed request", async () => {
  const { app: a } = app();
  const token = await publishFor(a, "prod/worker-0");
  const url = "/v1/machines/prod/worker-0/config";
  const ok = await a.inject({ url, headers: bearer(token) });
  assert.equal(ok.statusCode, 200);
  const etag = String(ok.headers.etag);
  assert.equal(
    (await a.inject({ url, headers: { ...bearer(READER), "if-none-match": etag } })).statusCode,
    304,
  );
  // A new publish mints a new token: the first one stops working.
  const again = await a.inject({
    method: "PUT",
    url,
    headers: { ...bearer(ADMIN), "content-type": "text/plain" },
    payload: "#cloud-config\n",
  });
  assert.equal(again.statusCode, 200);
  assert.equal((await a.inject({ url, headers: bearer(token) })).statusCode, 401);
  assert.equal(
    (await a.inject({ url: "/v1/machines/prod/Bad/config", headers: bearer(READER) })).statusCode,
    400,
  );
  const metrics = (await a.inject({ url: "/metrics" })).body;
  const count = (labels: string) =>
    Number(new RegExp(`^bootseal_fetches_total\\{${labels}\\} (\\d+)$`, "m").exec(metrics)?.[1] ?? 0);
  assert.equal(count('who="machine",outcome="ok"'), 1);
  assert.equal(count('who="controller",outcome="not_modified"'), 1);
  assert.equal(count('who="machine",outcome="unauthorized"'), 1);
  assert.doesNotMatch(metrics, /bootseal_fetches_total\{[^}]*outcome="(?:BAD_INPUT|bad_input)"/);
  await a.close();
});
