/**
 * The OpenAPI document the live service serves at /docs/openapi.json, checked three ways:
 *
 * 1. by the linters operators use: `@redocly/cli lint` (recommended rules, 0 errors and 0
 *    warnings) and the peer openapi-spec-validator (PyPI);
 * 2. against the server's real answers: every operation is called over HTTP (happy paths and
 *    errors), and each answer's status, content type and body must be what the document says
 *    (Ajv on the response schema of that status and media type); the walk fails when an
 *    operation of the document was not called;
 * 3. by a client generated from it: openapi-typescript writes the types into a temporary
 *    directory, a small openapi-fetch program there is type-checked with `tsc --noEmit` (so the
 *    operation names and content types are usable) and run against the server.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { execPath } from "node:process";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { Ajv, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import type { FastifyInstance } from "fastify";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { peer } from "../helpers/peers.ts";
import { whenReady } from "../helpers/until.ts";
import { appConfig } from "./app-config.ts";

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, "../..");
const bin = (p: string) => join(REPO, "node_modules", p);
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const READER = "controller-reader-token-0123456789abcdefghijk";
const RECIPIENT = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p";
const sha = (s: string | Buffer) => createHash("sha256").update(s).digest("hex");

type Schema = Record<string, unknown>;
interface MediaObject {
  schema?: Schema;
}
interface ResponseObject {
  description: string;
  content?: Record<string, MediaObject>;
}
interface Operation {
  operationId: string;
  security?: unknown[];
  responses: Record<string, ResponseObject>;
}
interface Document {
  openapi: string;
  servers?: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
}

const work = mkdtempSync(join(tmpdir(), "bootseal-openapi-"));
const artifacts = join(work, "artifacts");
mkdirSync(artifacts);
writeFileSync(join(artifacts, "bootseal-linux-x64"), randomBytes(4096));
writeFileSync(join(artifacts, "bootseal-windows-x64.exe"), randomBytes(4096));
after(() => rmSync(work, { recursive: true, force: true }));

let app: FastifyInstance;
let base: string;
let doc: Document;
let docFile: string;

before(async () => {
  app = buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${RECIPIENT}\n`, "t"),
      controllers: [
        { name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] },
        { name: "reader", tokenSha256: sha(READER), scopes: ["status:read"] },
      ],
      artifacts: { dir: artifacts, signingKeyFile: join(work, "signing-key.pem") },
      bootstrapToken: { ttlMs: 3_600_000, uses: 5, derivationKey: randomBytes(32) },
      rateLimit: { authFailuresPerMinute: 3 },
    }),
  });
  base = await app.listen({ host: "127.0.0.1", port: 0 });
  const r = await fetch(`${base}/docs/openapi.json`);
  assert.equal(r.status, 200);
  const text = await r.text();
  doc = JSON.parse(text) as Document;
  docFile = join(work, "openapi.json");
  writeFileSync(docFile, text);
});
after(() => app.close());

const operations = () =>
  Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ path, method, op })),
  );

describe("the document passes the linters", () => {
  test("@redocly/cli lint, recommended rules: 0 errors, 0 warnings", async () => {
    const { stdout } = await run(
      execPath,
      [bin("@redocly/cli/bin/cli.js"), "lint", "--format=json", docFile],
      {
        cwd: work,
        env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
      },
    ).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? "" }));
    const out = JSON.parse(stdout) as {
      totals: { errors: number; warnings: number };
      problems: { ruleId: string; message: string; location: { pointer: string }[] }[];
    };
    const problems = out.problems.map((p) => `${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`);
    assert.deepEqual(problems, []);
    assert.deepEqual(out.totals, { ...out.totals, errors: 0, warnings: 0 });
  });

  test("openapi-spec-validator (PyPI) accepts it", async () => {
    const { stdout } = await run(peer("OPENAPI_SPEC_VALIDATOR"), [docFile]);
    assert.match(stdout, /OK/);
  });

  test("a broken document is refused by both (the checks can fail)", async () => {
    const broken = structuredClone(doc) as unknown as { paths: Record<string, Record<string, unknown>> };
    const op = broken.paths["/healthz"]?.get as { responses?: unknown; operationId?: string };
    delete op.responses;
    delete op.operationId;
    const file = join(work, "broken.json");
    writeFileSync(file, JSON.stringify(broken));
    await assert.rejects(run(peer("OPENAPI_SPEC_VALIDATOR"), [file]));
    const lint = await run(execPath, [bin("@redocly/cli/bin/cli.js"), "lint", "--format=json", file], {
      cwd: work,
      env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
    }).then(
      () => undefined,
      (err: { stdout?: string }) => JSON.parse(err.stdout ?? "{}") as { totals?: { errors: number } },
    );
    assert.ok((lint?.totals?.errors ?? 0) > 0, "redocly reports the missing responses");
  });

  test("every operation is named, tagged and answers its errors as {code, message}", () => {
    const ids = operations().map(({ op }) => op.operationId);
    assert.deepEqual([...ids].sort(), [
      "checkDeployment",
      "deleteConfig",
      "getArtifact",
      "getConfig",
      "getStatus",
      "getUserdata",
      "healthz",
      "listMachines",
      "loginMachine",
      "metrics",
      "mintUserdata",
      "postStatus",
      "publishConfig",
      "readyz",
      "streamEvents",
      "tpmLoginChallenge",
    ]);
    assert.ok((doc.servers?.length ?? 0) > 0, "servers");
    for (const { op } of operations()) {
      for (const [status, response] of Object.entries(op.responses)) {
        // /readyz's 503 is its readiness answer ({status, checks}), not an error.
        if (!/^[45]/.test(status) || (op.operationId === "readyz" && status === "503")) continue;
        const schema = response.content?.["application/json"]?.schema;
        assert.deepEqual(schema?.required, ["code", "message"], `${op.operationId} ${status}`);
      }
    }
    const anonymous = operations()
      .filter(({ op }) => Array.isArray(op.security) && op.security.length === 0)
      .map(({ op }) => op.operationId)
      .sort();
    assert.deepEqual(anonymous, [
      "getArtifact",
      "healthz",
      "loginMachine",
      "metrics",
      "readyz",
      "tpmLoginChallenge",
    ]);
  });
});

/** `type/subtype` and its parameters, lower case. */
function mediaType(value: string): { essence: string; params: Map<string, string> } {
  const [essence = "", ...rest] = value.split(";").map((s) => s.trim().toLowerCase());
  const params = new Map<string, string>();
  for (const p of rest) {
    const [k, v] = p.split("=");
    if (k && v !== undefined) params.set(k, v);
  }
  return { essence, params };
}

/** The document's media type an answer's Content-Type is: same essence, its parameters all present. */
function matchingMedia(content: Record<string, MediaObject>, actual: string): string | undefined {
  const a = mediaType(actual);
  return Object.keys(content).find((key) => {
    const k = mediaType(key);
    return k.essence === a.essence && [...k.params].every(([n, v]) => a.params.get(n) === v);
  });
}

describe("the live answers are what the document says", () => {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addFormat("binary", true);
  const validators = new Map<object, ValidateFunction>();
  const called = new Map<string, Set<string>>();

  /** Checks one real answer against the operation's response; returns its body. */
  async function check(operationId: string, res: Response, expectStatus: number): Promise<unknown> {
    const found = operations().find(({ op }) => op.operationId === operationId);
    assert.ok(found, `no operation ${operationId}`);
    const { op } = found;
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.equal(res.status, expectStatus, `${operationId}: ${bytes.toString().slice(0, 300)}`);
    const status = String(res.status);
    const response = op.responses[status] ?? op.responses[`${status[0]}XX`];
    assert.ok(response, `${operationId} ${status} is not in the document`);
    const seen = called.get(operationId) ?? new Set<string>();
    seen.add(status);
    called.set(operationId, seen);
    if (!response.content) {
      assert.equal(bytes.length, 0, `${operationId} ${status}: the document says no body`);
      return undefined;
    }
    const type = res.headers.get("content-type") ?? "";
    const media = matchingMedia(response.content, type);
    assert.ok(
      media,
      `${operationId} ${status}: content type ${type} is not one of ${Object.keys(response.content).join(", ")}`,
    );
    const schema = response.content[media]?.schema;
    assert.ok(schema, `${operationId} ${status} ${media}: no schema`);
    const essence = mediaType(media).essence;
    const isJson = essence === "application/json" || essence.endsWith("+json");
    const body: unknown = isJson ? JSON.parse(bytes.toString("utf8")) : bytes.toString("latin1");
    let validate = validators.get(schema);
    if (!validate) {
      validate = ajv.compile(schema);
      validators.set(schema, validate);
    }
    assert.ok(validate(body), `${operationId} ${status} ${media}: ${ajv.errorsText(validate.errors)}`);
    return body;
  }

  const auth = (token: string, extra: Record<string, string> = {}) => ({
    authorization: `Bearer ${token}`,
    ...extra,
  });
  const url = (path: string) => `${base}${path}`;
  const machine = "/v1/machines/prod/web-1";

  test("every operation, happy paths and errors", async () => {
    // publishConfig: created, replaced, a failed precondition, an unauthorised and a forbidden caller.
    const created = (await check(
      "publishConfig",
      await fetch(url(`${machine}/config`), {
        method: "PUT",
        headers: auth(ADMIN, { "content-type": "text/plain", "if-none-match": "*" }),
        body: "#cloud-config\nruncmd: [echo hi]\n",
      }),
      201,
    )) as { etag: string; bootstrapToken: string };
    await check(
      "publishConfig",
      await fetch(url(`${machine}/config`), {
        method: "PUT",
        headers: auth(ADMIN, { "content-type": "application/octet-stream", "if-match": created.etag }),
        body: randomBytes(64),
      }),
      200,
    );
    await check(
      "publishConfig",
      await fetch(url(`${machine}/config`), {
        method: "PUT",
        headers: auth(ADMIN, { "content-type": "text/plain", "if-none-match": "*" }),
        body: "again",
      }),
      412,
    );
    await check(
      "publishConfig",
      await fetch(url(`${machine}/config`), { method: "PUT", headers: auth(READER), body: "x" }),
      403,
    );
    await check("publishConfig", await fetch(url(`${machine}/config`), { method: "PUT", body: "x" }), 401);
    const second = (await check(
      "publishConfig",
      await fetch(url("/v1/machines/prod/web-2/config?format=json"), {
        method: "PUT",
        headers: auth(ADMIN, { "content-type": "application/json" }),
        body: JSON.stringify({ a: 1 }),
      }),
      201,
    )) as { bootstrapToken: string };

    // getConfig: the SOPS document (binary store: JSON), a 304, a missing one.
    const got = await fetch(url(`${machine}/config`), { headers: auth(ADMIN) });
    const etag = got.headers.get("etag") ?? "";
    await check("getConfig", got, 200);
    await check(
      "getConfig",
      await fetch(url(`${machine}/config`), { headers: auth(ADMIN, { "if-none-match": etag }) }),
      304,
    );
    await check(
      "getConfig",
      await fetch(url("/v1/machines/prod/none/config"), { headers: auth(ADMIN) }),
      404,
    );
    await check(
      "getConfig",
      await fetch(url("/v1/machines/prod/web-2/config"), { headers: auth(ADMIN) }),
      200,
    );

    // getUserdata and mintUserdata in every format; GET after a mint is 409 MINT_REQUIRED.
    for (const format of ["cloud-init", "ignition", "powershell"]) {
      await check(
        "getUserdata",
        await fetch(url(`${machine}/userdata?format=${format}`), { headers: auth(ADMIN) }),
        200,
      );
    }
    await check(
      "getUserdata",
      await fetch(url(`${machine}/userdata?format=vmware`), { headers: auth(ADMIN) }),
      400,
    );

    await check(
      "mintUserdata",
      await fetch(url(`${machine}/userdata?format=ignition`), { method: "POST", headers: auth(ADMIN) }),
      200,
    );
    await check(
      "mintUserdata",
      await fetch(url(`/v1/machines/prod/none/userdata?format=ignition`), {
        method: "POST",
        headers: auth(ADMIN),
      }),
      404,
    );
    const minted = (await check(
      "mintUserdata",
      await fetch(url(`${machine}/userdata?format=cloud-init`), { method: "POST", headers: auth(ADMIN) }),
      200,
    )) as string;
    const token = minted.match(/bst\.prod\.web-1\.[A-Za-z0-9_-]+/)?.[0];
    assert.ok(token, "the stub carries the minted token");
    const conflict = await fetch(url(`${machine}/userdata?format=cloud-init`), { headers: auth(ADMIN) });
    assert.equal(((await check("getUserdata", conflict, 409)) as { code: string }).code, "MINT_REQUIRED");

    // postStatus with the machine's own token: held (202), written (200), a bad body (400), a
    // body that is not JSON (415).
    const post = (t: string, body: string, type = "application/json", path = machine) =>
      fetch(url(`${path}/status`), { method: "POST", headers: auth(t, { "content-type": type }), body });
    await check("postStatus", await post(token, JSON.stringify({ phase: "fetching" })), 202);
    await check("postStatus", await post(token, JSON.stringify({ phase: "succeeded", exitCode: 0 })), 200);
    await check("postStatus", await post(token, JSON.stringify({ phase: "nope" })), 400);
    await check("postStatus", await post(token, "phase=running", "application/x-www-form-urlencoded"), 415);
    await check("postStatus", await post(second.bootstrapToken, "{}", "application/json", machine), 403);

    // getStatus, listMachines.
    const statusRes = await fetch(url(`${machine}/status`), { headers: auth(READER) });
    const statusEtag = statusRes.headers.get("etag") ?? "";
    await check("getStatus", statusRes, 200);
    await check(
      "getStatus",
      await fetch(url(`${machine}/status`), { headers: auth(READER, { "if-none-match": statusEtag }) }),
      304,
    );
    await check(
      "getStatus",
      await fetch(url("/v1/machines/prod/none/status"), { headers: auth(READER) }),
      404,
    );
    await check("listMachines", await fetch(url("/v1/machines?limit=1"), { headers: auth(READER) }), 200);
    await check("listMachines", await fetch(url("/v1/machines?limit=0"), { headers: auth(READER) }), 400);

    // loginMachine: machineAuth is off here, so a login is 501 UNSUPPORTED (login-aws.test.ts and
    // the others walk the real logins).
    const login = (body: string) =>
      fetch(url(`${machine}/login`), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
    const refused = await login(JSON.stringify({ method: "gcp", credential: "x.y.z" }));
    assert.equal(refused.status, 501, "machineAuth is off: UNSUPPORTED");
    await check("loginMachine", refused, refused.status);
    await check("loginMachine", await login(JSON.stringify({ method: "gcp" })), 400);
    // tpmLoginChallenge: likewise 501 here (login-tpm.test.ts walks it against real TPMs).
    const challenge = (body: string) =>
      fetch(url(`${machine}/login/challenge`), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
    await check(
      "tpmLoginChallenge",
      await challenge(JSON.stringify({ ekPublic: "AA==", akPublic: "AA==" })),
      501,
    );
    await check("tpmLoginChallenge", await challenge(JSON.stringify({ ekPublic: "AA==" })), 400);

    // streamEvents: the stream's head (it never ends), and a caller without status:read.
    const abort = new AbortController();
    const stream = await fetch(url("/v1/events"), { headers: auth(READER), signal: abort.signal });
    assert.equal(stream.status, 200);
    const op = operations().find(({ op }) => op.operationId === "streamEvents")?.op;
    assert.ok(matchingMedia(op?.responses["200"]?.content ?? {}, stream.headers.get("content-type") ?? ""));
    const first = await stream.body?.getReader().read();
    assert.match(Buffer.from(first?.value ?? []).toString(), /^retry: \d+/);
    abort.abort();
    called.set("streamEvents", new Set(["200"]));
    await check(
      "streamEvents",
      await fetch(url("/v1/events"), { headers: auth(second.bootstrapToken) }),
      403,
    );

    // deleteConfig: deleted, then 404 (web-1's config went with its succeeded report).
    const web2 = url("/v1/machines/prod/web-2/config");
    await check("deleteConfig", await fetch(web2, { method: "DELETE", headers: auth(ADMIN) }), 204);
    await check("deleteConfig", await fetch(web2, { method: "DELETE", headers: auth(ADMIN) }), 404);

    // getArtifact: an executable, its signature, the sums, the key, a 304 and an unknown name.
    const exe = await fetch(url("/v1/artifacts/bootseal-linux-x64"));
    const exeTag = exe.headers.get("etag") ?? "";
    await check("getArtifact", exe, 200);
    for (const file of ["bootseal-linux-x64.sig", "SHA256SUMS", "signing-key.pem"]) {
      await check("getArtifact", await fetch(url(`/v1/artifacts/${file}`)), 200);
    }
    await check(
      "getArtifact",
      await fetch(url("/v1/artifacts/bootseal-linux-x64"), { headers: { "if-none-match": exeTag } }),
      304,
    );
    await check("getArtifact", await fetch(url("/v1/artifacts/passwd")), 404);

    // checkDeployment: the store and key checks; a reader lacks admin; no credential.
    await check(
      "checkDeployment",
      await fetch(url("/v1/check"), { method: "POST", headers: auth(ADMIN) }),
      200,
    );
    await check(
      "checkDeployment",
      await fetch(url("/v1/check"), { method: "POST", headers: auth(READER) }),
      403,
    );
    await check("checkDeployment", await fetch(url("/v1/check"), { method: "POST" }), 401);

    // healthz, readyz (once the executables are prepared), metrics.
    await check("healthz", await fetch(url("/healthz")), 200);
    await whenReady(base);
    await check("readyz", await fetch(url("/readyz")), 200);
    await check("metrics", await fetch(url("/metrics")), 200);

    // The rate limit after repeated failed credentials: 429 with Retry-After.
    let limited: Response | undefined;
    for (let i = 0; i < 6 && !limited; i++) {
      const r = await fetch(url("/v1/machines"), { headers: auth(`wrong-${i}`) });
      if (r.status === 429) limited = r;
      else await check("listMachines", r, 401);
    }
    assert.ok(limited, "429 after repeated failures");
    assert.ok(Number(limited.headers.get("retry-after")) > 0);
    await check("listMachines", limited, 429);

    assert.deepEqual(
      operations()
        .map(({ op }) => op.operationId)
        .filter((id) => !called.has(id)),
      [],
      "every operation of the document was called",
    );
  });
});

describe("a client generated from the document", () => {
  test("openapi-typescript types + openapi-fetch: type-checked with tsc --noEmit, then run", async () => {
    const dir = join(work, "client");
    mkdirSync(dir);
    symlinkSync(join(REPO, "node_modules"), join(dir, "node_modules"));
    await run(execPath, [bin("openapi-typescript/bin/cli.js"), docFile, "-o", join(dir, "schema.ts")]);
    const tsconfig = (file: string) =>
      JSON.stringify({
        compilerOptions: {
          target: "es2023",
          module: "nodenext",
          moduleResolution: "nodenext",
          strict: true,
          noEmit: true,
          allowImportingTsExtensions: true,
          skipLibCheck: true,
          types: ["node"],
        },
        files: [file],
      });
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
    writeFileSync(join(dir, "client.ts"), CLIENT);
    writeFileSync(join(dir, "tsconfig.json"), tsconfig("client.ts"));
    writeFileSync(join(dir, "wrong.ts"), WRONG);
    writeFileSync(join(dir, "tsconfig.wrong.json"), tsconfig("wrong.ts"));
    const tsc = (project: string) =>
      run(execPath, [bin("typescript/bin/tsc"), "-p", join(dir, project)], { cwd: dir });
    await tsc("tsconfig.json").catch((err: { stdout?: string }) =>
      assert.fail(`client.ts does not type-check:\n${err.stdout}`),
    );
    // A program with a wrong path and a wrong field type must not type-check: the check is real.
    await assert.rejects(tsc("tsconfig.wrong.json"), (err: { stdout?: string }) => {
      assert.match(err.stdout ?? "", /wrong\.ts\(6,7\).*TS2322/);
      assert.match(err.stdout ?? "", /wrong\.ts\(7,/);
      return true;
    });
    const { stdout } = await run(execPath, [join(dir, "client.ts"), base, ADMIN], { cwd: dir });
    const out = JSON.parse(stdout) as Record<string, unknown>;
    assert.deepEqual(out, {
      published: { status: 201, version: 1, hasToken: true },
      status: { phase: "published", version: 1 },
      posted: { status: 200, phase: "succeeded" },
      listed: ["gen/client-0"],
      userdata: { status: 200, cloudConfig: true },
      error: { status: 404, code: "NOT_FOUND" },
    });
  });
});

/** The generated client's program: publish, get status, post status, list, user data, an error. */
const CLIENT = `
import createClient from "openapi-fetch";
import type { paths } from "./schema.ts";

const [base, admin] = process.argv.slice(2) as [string, string];
const client = createClient<paths>({ baseUrl: base, headers: { authorization: \`Bearer \${admin}\` } });
const params = { path: { ns: "gen", name: "client-0" } };

const pub = await client.PUT("/v1/machines/{ns}/{name}/config", {
  params: { ...params, header: { "if-none-match": "*" } },
  body: "#cloud-config\\n",
  bodySerializer: (b) => b as string,
  headers: { "content-type": "text/plain" },
});
if (!pub.data) throw new Error(\`publish: \${pub.error?.code}\`);
const token: string | undefined = pub.data.bootstrapToken;

const userdata = await client.GET("/v1/machines/{ns}/{name}/userdata", {
  params: { ...params, query: { format: "cloud-init" } },
  parseAs: "text",
});

const status = await client.GET("/v1/machines/{ns}/{name}/status", { params });
if (!status.data) throw new Error("status");

const machine = createClient<paths>({ baseUrl: base, headers: { authorization: \`Bearer \${token}\` } });
const posted = await machine.POST("/v1/machines/{ns}/{name}/status", {
  params,
  body: { phase: "succeeded", exitCode: 0 },
});
if (!posted.data) throw new Error(\`post status: \${posted.error?.message}\`);

const list = await client.GET("/v1/machines", { params: { query: { namespace: "gen", limit: 10 } } });
const names = (list.data?.items ?? []).map((m) => \`\${m.namespace}/\${m.name}\`);


const missing = await client.GET("/v1/machines/{ns}/{name}/status", {
  params: { path: { ns: "gen", name: "nobody" } },
});
const code: string | undefined = missing.error?.code;

process.stdout.write(
  JSON.stringify({
    published: { status: pub.response.status, version: pub.data.version, hasToken: typeof token === "string" },
    status: { phase: status.data.phase, version: status.data.version },
    posted: { status: posted.response.status, phase: posted.data.phase },
    listed: names,
    userdata: { status: userdata.response.status, cloudConfig: (userdata.data ?? "").startsWith("#cloud-config") },
    error: { status: missing.response.status, code },
  }),
);
`;

/** Uses an operation path that does not exist and a field no answer has. */
const WRONG = `
import createClient from "openapi-fetch";
import type { paths } from "./schema.ts";
const client = createClient<paths>({ baseUrl: "http://x" });
const r = await client.GET("/v1/machines/{ns}/{name}/status", { params: { path: { ns: "a", name: "b" } } });
const n: number = r.data?.phase ?? 0;
await client.GET("/v1/nothing", {});
export { n };
`;
