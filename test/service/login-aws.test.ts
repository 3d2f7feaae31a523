/**
 * Machine login with AWS IAM against moto's STS (the real wire protocol: a SigV4-signed
 * GetCallerIdentity, answered with the ARN of the calling access key). Roles are created
 * with moto's IAM API and their credentials come from AssumeRole; the credential is made by
 * the fetcher's own provider (src/fetcher/identity/aws-iam.ts), the service is the real app.
 *
 * Allowed role: login, fetch and status with the minted token. Refused: another role (403),
 * a signature for another server id, a stale X-Amz-Date, a tampered body, the server-id
 * header left out of SignedHeaders, a malformed credential (401 each), STS down (503).
 * Also: the audit line names the principal and never the credential, failures are
 * rate limited, a machine without a config gets no token, instance-id bindings.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { PassThrough } from "node:stream";
import { before, test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { type MachineAuthConfig, parseMachineAuth } from "../../src/config/machine-auth.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { awsIamProvider } from "../../src/fetcher/identity/aws-iam.ts";
import { SERVER_ID_HEADER } from "../../src/machine/identity-login.ts";
import { buildApp } from "../../src/service/app.ts";
import { auditLoggerTo } from "../../src/service/plugins/audit.ts";
import { assumeRole, createRole, MOTO_ACCOUNT, MOTO_REGION, motoEndpoint } from "../helpers/moto-iam.ts";
import { uniqueName } from "../helpers/peers.ts";
import { freePort } from "../helpers/ports.ts";
import { appConfig } from "./app-config.ts";

const AUDIENCE = "https://bootseal.login.test";
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

let recipient: string;
let roleA: string;
let roleB: string;
let credsA: Awaited<ReturnType<typeof assumeRole>>;
let credsB: Awaited<ReturnType<typeof assumeRole>>;
let credsInstance: Awaited<ReturnType<typeof assumeRole>>;
const INSTANCE = "i-0a1b2c3d4e5f60718";

before(async () => {
  recipient = await identityToRecipient(await generateX25519Identity());
  roleA = uniqueName("web-role");
  roleB = uniqueName("other-role");
  const arnA = await createRole(roleA);
  const arnB = await createRole(roleB);
  credsA = await assumeRole(arnA, "boot-session");
  credsB = await assumeRole(arnB, "boot-session");
  credsInstance = await assumeRole(arnB, INSTANCE);
});

function machineAuth(stsEndpoint: string): MachineAuthConfig {
  return parseMachineAuth(
    {
      audience: AUDIENCE,
      tokenTtl: "1h",
      aws: { stsEndpoint, region: MOTO_REGION },
      bindings: [
        // The role ARN (with a path, which STS leaves out of the assumed-role ARN).
        {
          method: "aws-iam",
          match: { arn: `arn:aws:iam::${MOTO_ACCOUNT}:role/team/${roleA}` },
          machines: "prod/*",
        },
        {
          method: "aws-iam",
          match: { arn: `arn:aws:sts::${MOTO_ACCOUNT}:assumed-role/${roleB}/*` },
          machines: ["edge/*"],
          instanceIdFromSession: true,
        },
      ],
    },
    undefined,
  );
}

function service(options: { stsEndpoint?: string; failuresPerMinute?: number; skewMs?: number } = {}) {
  const lines: string[] = [];
  const audit = new PassThrough();
  audit.on("data", (c: Buffer) => lines.push(...c.toString().split("\n").filter(Boolean)));
  const app = buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      rateLimit: { authFailuresPerMinute: options.failuresPerMinute ?? 100 },
      machineAuth: machineAuth(options.stsEndpoint ?? motoEndpoint()),
    }),
    audit: auditLoggerTo(audit),
    now: () => new Date(Date.now() + (options.skewMs ?? 0)),
  });
  return { app, audit: lines };
}

type App = ReturnType<typeof service>["app"];

async function publish(app: App, machine: string): Promise<void> {
  const res = await app.inject({
    method: "PUT",
    url: `/v1/machines/${machine}/config`,
    headers: { ...bearer(ADMIN), "content-type": "text/plain" },
    payload: `secret for ${machine}\n`,
  });
  assert.equal(res.statusCode, 201, res.body);
}

type Creds = typeof credsA;

async function credential(creds: Creds, options: { audience?: string; endpoint?: string } = {}) {
  const provider = awsIamProvider({
    region: MOTO_REGION,
    endpoint: options.endpoint ?? motoEndpoint(),
    credentials: creds,
  });
  return provider.credential({ audience: options.audience ?? AUDIENCE, env: {} });
}

/** The credential's signed request, edited after signing. */
function edit(
  cred: string,
  change: (req: { headers: Record<string, string>; body: string }) => void,
): string {
  const req = JSON.parse(Buffer.from(cred, "base64").toString("utf8"));
  change(req);
  return Buffer.from(JSON.stringify(req)).toString("base64");
}

function login(app: App, machine: string, cred: string, method = "aws-iam") {
  return app.inject({
    method: "POST",
    url: `/v1/machines/${machine}/login`,
    payload: { method, credential: cred },
  });
}

test("an allowed role logs in, then fetches and reports with the minted token", async () => {
  const { app, audit } = service();
  await publish(app, "prod/web-1");
  const cred = await credential(credsA);
  const res = await login(app, "prod/web-1", cred);
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.headers["cache-control"], "no-store");
  const { token, expiresAt } = res.json() as { token: string; expiresAt: string };
  assert.match(token, /^bst\.prod\.web-1\.[A-Za-z0-9_-]{43}$/);
  // machineAuth.tokenTtl: one hour, not bootstrapToken.ttl's day.
  const left = Date.parse(expiresAt) - Date.now();
  assert.ok(left > 55 * 60_000 && left <= 60 * 60_000, `expires in ${left} ms`);

  const get = await app.inject({
    method: "GET",
    url: "/v1/machines/prod/web-1/config",
    headers: bearer(token),
  });
  assert.equal(get.statusCode, 200, get.body);
  assert.match(get.body, /"sops"/);
  const post = await app.inject({
    method: "POST",
    url: "/v1/machines/prod/web-1/status",
    headers: bearer(token),
    payload: { phase: "succeeded" },
  });
  assert.equal(post.statusCode, 200, post.body);

  const line = audit.map((l) => JSON.parse(l)).find((l) => l.action === "login");
  assert.ok(line, audit.join("\n"));
  assert.equal(line.outcome, "ok");
  assert.equal(line.machine, "prod/web-1");
  assert.equal(line.identity, `aws-iam:arn:aws:sts::${MOTO_ACCOUNT}:assumed-role/${roleA}/boot-session`);
  const all = audit.join("\n");
  assert.ok(!all.includes(cred) && !all.includes(token) && !all.includes(credsA.secretAccessKey));
  await app.close();
});

test("a second login replaces the first token", async () => {
  const { app } = service();
  await publish(app, "prod/web-2");
  const first = (await login(app, "prod/web-2", await credential(credsA))).json() as { token: string };
  const second = await login(app, "prod/web-2", await credential(credsA));
  assert.equal(second.statusCode, 200, second.body);
  const old = await app.inject({
    method: "GET",
    url: "/v1/machines/prod/web-2/config",
    headers: bearer(first.token),
  });
  assert.equal(old.statusCode, 401, old.body);
  await app.close();
});

test("another role is refused 403 for the machine, and audited with its ARN", async () => {
  const { app, audit } = service();
  await publish(app, "prod/web-3");
  const res = await login(app, "prod/web-3", await credential(credsB));
  assert.equal(res.statusCode, 403, res.body);
  assert.equal(res.json().code, "FORBIDDEN");
  const line = audit.map((l) => JSON.parse(l)).find((l) => l.action === "login");
  assert.equal(line?.outcome, "denied");
  assert.match(line?.identity ?? "", new RegExp(`assumed-role/${roleB}/`));
  await app.close();
});

test("instanceIdFromSession: an instance's session logs in as the machine named by its instance id only", async () => {
  const { app } = service();
  await publish(app, `edge/${INSTANCE}`);
  await publish(app, "edge/i-0000000000000000f");
  const ok = await login(app, `edge/${INSTANCE}`, await credential(credsInstance));
  assert.equal(ok.statusCode, 200, ok.body);
  const other = await login(app, "edge/i-0000000000000000f", await credential(credsInstance));
  assert.equal(other.statusCode, 403, other.body);
  // The same role with a session name that is not an instance id.
  const notInstance = await login(app, `edge/${INSTANCE}`, await credential(credsB));
  assert.equal(notInstance.statusCode, 403, notInstance.body);
  await app.close();
});

test("a signature made for another server id is refused 401", async () => {
  const { app } = service();
  await publish(app, "prod/web-4");
  const res = await login(app, "prod/web-4", await credential(credsA, { audience: "https://other.example" }));
  assert.equal(res.statusCode, 401, res.body);
  assert.equal(res.json().code, "UNAUTHORIZED");
  assert.match(res.json().message, /another server id/);
  await app.close();
});

test("a stale X-Amz-Date is refused 401 (the service clock 16 minutes on)", async () => {
  const { app } = service({ skewMs: 16 * 60_000 });
  await publish(app, "prod/web-5");
  const res = await login(app, "prod/web-5", await credential(credsA));
  assert.equal(res.statusCode, 401, res.body);
  assert.match(res.json().message, /15 minutes/);
  await app.close();
});

test("a tampered body is refused 401", async () => {
  const { app } = service();
  await publish(app, "prod/web-6");
  const cred = edit(await credential(credsA), (r) => {
    r.body = "Action=GetCallerIdentity&Version=2011-06-15&Extra=1";
  });
  const res = await login(app, "prod/web-6", cred);
  assert.equal(res.statusCode, 401, res.body);
  assert.match(res.json().message, /body/);
  await app.close();
});

test("a server-id header that is not signed is refused 401", async () => {
  const { app } = service();
  await publish(app, "prod/web-7");
  const cred = edit(await credential(credsA), (r) => {
    r.headers.authorization = (r.headers.authorization as string).replace(`;${SERVER_ID_HEADER}`, "");
  });
  assert.notEqual(cred, await credential(credsA));
  const res = await login(app, "prod/web-7", cred);
  assert.equal(res.statusCode, 401, res.body);
  assert.match(res.json().message, /not among the signed headers/);
  await app.close();
});

test("a malformed credential is 401, and failures past the limit are 429 with Retry-After", async () => {
  const { app } = service({ failuresPerMinute: 2 });
  await publish(app, "prod/web-8");
  const codes: number[] = [];
  for (const cred of ["not base64 at all!", Buffer.from("{}").toString("base64"), "eyJ9"]) {
    const res = await login(app, "prod/web-8", cred);
    codes.push(res.statusCode);
    if (res.statusCode === 429) assert.ok(Number(res.headers["retry-after"]) >= 1);
  }
  assert.deepEqual(codes, [401, 401, 429]);
  await app.close();
});

test("STS down (a closed port) is 503 KEY_UNAVAILABLE", async () => {
  const closed = `http://127.0.0.1:${await freePort()}`;
  const { app } = service({ stsEndpoint: closed });
  await publish(app, "prod/web-9");
  const res = await login(app, "prod/web-9", await credential(credsA, { endpoint: closed }));
  assert.equal(res.statusCode, 503, res.body);
  assert.equal(res.json().code, "KEY_UNAVAILABLE");
  await app.close();
});

test("a credential signed for another STS endpoint is refused 401 and never sent there", async () => {
  const { app } = service();
  await publish(app, "prod/web-10");
  const elsewhere = `http://127.0.0.1:${await freePort()}`;
  const res = await login(app, "prod/web-10", await credential(credsA, { endpoint: elsewhere }));
  assert.equal(res.statusCode, 401, res.body);
  assert.match(res.json().message, /another STS endpoint/);
  await app.close();
});

test("a bound machine without a published config gets no token (404)", async () => {
  const { app } = service();
  const res = await login(app, "prod/never-published", await credential(credsA));
  assert.equal(res.statusCode, 404, res.body);
  await app.close();
});

test("a method without a verifier or binding is 501", async () => {
  const { app } = service();
  const res = await login(app, "prod/web-1", "eyJhbGciOiJSUzI1NiJ9.e30.sig", "gcp");
  assert.equal(res.statusCode, 501, res.body);
  await app.close();
});
