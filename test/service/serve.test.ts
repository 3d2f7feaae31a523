/**
 * The integration suite: the real `bootseal serve` process over real HTTP on loopback, against
 * the file store and SeaweedFS S3 (two replicas on one bucket), with AWS KMS on moto, the real
 * sops to open what the service stored, and a log capture at the end. Processes are started
 * once, in parallel, and shared by the tests.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { CreateKeyCommand, KMSClient } from "@aws-sdk/client-kms";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { peer, uniqueName } from "../helpers/peers.ts";
import { freePort } from "../helpers/ports.ts";
import { whenReady } from "../helpers/until.ts";
import { type Call, call, MAIN_TS, type PublishResult, type Served, serve } from "./serve-harness.ts";

const ADMIN = randomBytes(32).toString("base64url");
const READER = randomBytes(32).toString("base64url");
const WRITER = randomBytes(32).toString("base64url");
const CANARY = `CANARY-${randomBytes(12).toString("hex")}`;
const sha = (s: string | Uint8Array) => createHash("sha256").update(s).digest("hex");

const controllers = [
  { name: "admin", tokenSha256: sha(ADMIN), scopes: ["admin"] },
  { name: "reader", tokenSha256: sha(READER), scopes: ["status:read", "configs:read"] },
  { name: "writer", tokenSha256: sha(WRITER), scopes: ["configs:write", "tokens:mint"] },
];

let dir: string;
let identity: string;
let recipient: string;
let otherRecipient: string;
let kmsArn: string;
let a: Served; // file store, ttl 1h, 2 uses, KMS rule
let b: Served; // file store, ttl 1s, one-time after-first-fetch
let c: Served; // file store, one-time after-success
let s1: Served; // SeaweedFS replica 1
let s2: Served; // SeaweedFS replica 2
let down: Served; // S3 on a closed port
const all = () => [a, b, c, s1, s2, down].filter(Boolean);

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, cwd: string) {
  return new Promise<{ status: number | null; stdout: Buffer; stderr: string }>((resolve, reject) => {
    const child = spawn(cmd, args, { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, stdout: Buffer.concat(out), stderr: err }));
  });
}

/** The service's environment: no age identity anywhere, only what it needs to encrypt. */
function serviceEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: dir,
    AWS_ACCESS_KEY_ID: "testing",
    AWS_SECRET_ACCESS_KEY: "testing",
    AWS_REGION: "us-east-1",
    AWS_ENDPOINT_URL_KMS: peer("KMS_MOTO_ENDPOINT"),
    ...extra,
  };
}

function baseConfig(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    store: `file://${join(dir, "store")}`,
    creation_rules: [
      { path_regex: "^other/", age: otherRecipient },
      { path_regex: "^kms/", kms: kmsArn, age: recipient },
      { age: recipient },
    ],
    controllers,
    bootstrapToken: { ttl: "1h", uses: 2 },
    limits: { bodyBytes: 65536 },
    rateLimit: { authFailuresPerMinute: 1000 },
    audit: { path: join(dir, `audit-${name}.log`) },
    events: { heartbeatSeconds: 1 },
    logLevel: "info",
    ...extra,
  };
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "bootseal-serve-it-"));
  identity = await generateX25519Identity();
  recipient = await identityToRecipient(identity);
  otherRecipient = await identityToRecipient(await generateX25519Identity());
  writeFileSync(join(dir, "age.txt"), `${identity}\n`, { mode: 0o600 });

  const kms = new KMSClient({
    endpoint: peer("KMS_MOTO_ENDPOINT"),
    region: "us-east-1",
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  });
  kmsArn = (await kms.send(new CreateKeyCommand({ Description: uniqueName("bootseal-serve") }))).KeyMetadata!
    .Arn as string;
  kms.destroy();

  const endpoint = peer("S3_SEAWEEDFS_ENDPOINT");
  const s3creds = {
    accessKeyId: peer("S3_SEAWEEDFS_ACCESS_KEY"),
    secretAccessKey: peer("S3_SEAWEEDFS_SECRET_KEY"),
  };
  const bucket = uniqueName("bootseal-serve");
  const s3 = new S3Client({ endpoint, region: "us-east-1", forcePathStyle: true, credentials: s3creds });
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  s3.destroy();
  const s3env = serviceEnv({
    AWS_ACCESS_KEY_ID: s3creds.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3creds.secretAccessKey,
  });
  const s3config = (name: string) =>
    baseConfig(name, { store: `s3://${bucket}/replicas`, s3: { endpoint, forcePathStyle: true } });
  const port = await freePort();
  const emptyArtifacts = join(dir, "no-artifacts");
  mkdirSync(emptyArtifacts);

  [a, b, c, s1, s2, down] = await Promise.all([
    // The sequence below reads worker-0's config after its `succeeded`: the old default, off.
    // An empty artifacts directory: the package's sea/ may hold a build (test/helpers/built-sea.ts).
    serve(
      dir,
      "a",
      baseConfig("a", { oneTimeFetch: "off", artifacts: { dir: emptyArtifacts } }),
      serviceEnv(),
    ),
    serve(
      dir,
      "b",
      baseConfig("b", { bootstrapToken: { ttl: "1s", uses: 5 }, oneTimeFetch: "after-first-fetch" }),
      serviceEnv(),
    ),
    serve(
      dir,
      "c",
      baseConfig("c", {
        oneTimeFetch: "after-success",
        publicUrl: "https://bootseal.example.test",
        fetcherArtifact: {
          url: "https://downloads.example.test/bootseal-linux-amd64",
          sha256: "ab".repeat(32),
          sha512: "ef".repeat(64),
          signatureUrl: "https://downloads.example.test/bootseal-linux-amd64.sig",
          publicKeyPem: generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" }),
        },
        fetcherArtifactWindows: {
          url: "https://downloads.example.test/bootseal-windows-amd64.exe",
          sha256: "cd".repeat(32),
          signatureUrl: "https://downloads.example.test/bootseal-windows-amd64.exe.sig",
          publicKeyPem: generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" }),
        },
      }),
      serviceEnv(),
    ),
    serve(dir, "s1", s3config("s1"), s3env),
    serve(dir, "s2", s3config("s2"), s3env),
    serve(
      dir,
      "down",
      baseConfig("down", { store: "s3://bootseal-down/x", s3: { endpoint: `http://127.0.0.1:${port}` } }),
      s3env,
    ),
  ]);
});

after(async () => {
  await Promise.all(all().map((s) => s.stop()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const cfg = (s: Served, m: string) => `${s.url}/v1/machines/${m}/config`;
const st = (s: Served, m: string) => `${s.url}/v1/machines/${m}/status`;

async function publish(
  s: Served,
  m: string,
  body: string | Uint8Array,
  headers: Record<string, string> = {},
) {
  const res = await call(cfg(s, m), { method: "PUT", token: ADMIN, body, headers });
  assert.ok(res.status === 200 || res.status === 201, `publish ${m}: ${res.status} ${res.body}`);
  return res.json<PublishResult>();
}

function report(s: Served, m: string, token: string, body: Record<string, unknown>): Promise<Call> {
  return call(st(s, m), {
    method: "POST",
    token,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

function expectError(res: Call, status: number, code?: string): void {
  assert.equal(res.status, status, res.body.toString());
  const body = res.json<{ code: string; message: string }>();
  assert.deepEqual(Object.keys(body).sort(), ["code", "message"]);
  if (code) assert.equal(body.code, code);
  assert.ok(!res.body.toString().includes("    at "), "no stack trace");
}

describe("bootseal serve (file store)", () => {
  const payload = Buffer.concat([
    Buffer.from(`#cloud-config\nruncmd:\n  - [kubeadm, join, --token, ${CANARY}]\n`),
    Buffer.from([0, 0xff, 0xfe, 0x80, 10]),
  ]);
  let pub: PublishResult;

  test("publish a binary payload: 201, version, etag, sha256 of the encrypted document, a token", async () => {
    const res = await call(cfg(a, "prod/worker-0"), {
      method: "PUT",
      token: WRITER,
      body: payload,
      headers: { "content-type": "application/octet-stream" },
    });
    assert.equal(res.status, 201, res.body.toString());
    pub = res.json<PublishResult>();
    assert.equal(pub.version, 1);
    assert.match(pub.bootstrapToken, /^bst\.prod\.worker-0\.[A-Za-z0-9_-]{43}$/);
    assert.ok(Date.parse(pub.tokenExpiresAt) > Date.now() + 3_000_000);
    assert.equal(res.headers.get("etag"), pub.etag);
    const again = await publish(a, "prod/worker-0", payload);
    assert.equal(again.version, 2, "the version counts publishes");
    assert.notEqual(again.bootstrapToken, pub.bootstrapToken);
    pub = again;
  });

  test("the machine fetches the document; it round-trips byte-exactly with bootseal decrypt and sops", async () => {
    const res = await call(cfg(a, "prod/worker-0"), { token: pub.bootstrapToken });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "application/sops+json");
    assert.equal(res.headers.get("etag"), pub.etag);
    assert.equal(sha(res.body), pub.sha256, "sha256 is of the stored encrypted document");
    assert.ok(!res.body.toString().includes(CANARY));
    const file = join(dir, "fetched.bin");
    writeFileSync(file, res.body);

    // The service's own environment has no identity: neither tool can open the document.
    const noKey = serviceEnv();
    const ours = await run(process.execPath, [MAIN_TS, "decrypt", file], noKey, dir);
    assert.notEqual(ours.status, 0, "bootseal decrypt must fail without an identity");
    assert.equal(ours.stdout.length, 0);
    const theirs = await run(peer("SOPS_BIN"), ["decrypt", file], noKey, dir);
    assert.notEqual(theirs.status, 0, "sops decrypt must fail without an identity");

    // The machine's identity opens it, byte for byte.
    const withKey = { ...noKey, SOPS_AGE_KEY_FILE: join(dir, "age.txt") };
    const opened = await run(process.execPath, [MAIN_TS, "decrypt", file], withKey, dir);
    assert.equal(opened.status, 0, opened.stderr);
    assert.ok(opened.stdout.equals(payload), "bootseal decrypt: byte-exact");
    const bySops = await run(peer("SOPS_BIN"), ["decrypt", file], withKey, dir);
    assert.equal(bySops.status, 0, bySops.stderr);
    assert.ok(bySops.stdout.equals(payload), "sops decrypt: byte-exact");
  });

  test("If-None-Match gives 304 without using a fetch; uses run out (401 TOKEN_EXHAUSTED)", async () => {
    const p = await publish(a, "prod/uses", "x");
    const first = await call(cfg(a, "prod/uses"), { token: p.bootstrapToken });
    assert.equal(first.status, 200);
    const cached = await call(cfg(a, "prod/uses"), {
      token: p.bootstrapToken,
      headers: { "if-none-match": p.etag },
    });
    assert.equal(cached.status, 304);
    assert.equal((await call(cfg(a, "prod/uses"), { token: p.bootstrapToken })).status, 200);
    expectError(await call(cfg(a, "prod/uses"), { token: p.bootstrapToken }), 401, "TOKEN_EXHAUSTED");
    // A controller with configs:read still reads it, without a token use.
    assert.equal((await call(cfg(a, "prod/uses"), { token: READER })).status, 200);
  });

  test("status: the machine posts phases, controllers read them, the list shows the current phase", async () => {
    // Intermediate phases are held by the replica (202) and written with the terminal one.
    for (const phase of ["fetching", "decrypted", "written", "running"]) {
      assert.equal((await report(a, "prod/worker-0", pub.bootstrapToken, { phase, attempt: 1 })).status, 202);
    }
    const done = await report(a, "prod/worker-0", pub.bootstrapToken, {
      phase: "succeeded",
      exitCode: 0,
      output: "This node has joined the cluster",
    });
    assert.equal(done.status, 200);
    const res = await call(st(a, "prod/worker-0"), { token: READER });
    assert.equal(res.status, 200);
    const rec = res.json<{ phase: string; version: number; history: { phase: string; by: string }[] }>();
    assert.equal(rec.phase, "succeeded");
    assert.equal(rec.version, 2);
    assert.deepEqual(
      rec.history.map((h) => h.phase),
      ["published", "published", "fetching", "decrypted", "written", "running", "succeeded"],
    );
    const list = await call(`${a.url}/v1/machines?namespace=prod&phase=succeeded`, { token: READER });
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.json<{ items: { name: string; phase: string }[] }>().items.map((i) => [i.name, i.phase]),
      [["worker-0", "succeeded"]],
    );
  });

  test("the list is paginated with limit/after", async () => {
    for (const n of ["p-0", "p-1", "p-2"]) await publish(a, `page/${n}`, "x");
    const one = await call(`${a.url}/v1/machines?namespace=page&limit=2`, { token: READER });
    const first = one.json<{ items: { name: string }[]; next?: string }>();
    assert.deepEqual(
      first.items.map((i) => i.name),
      ["p-0", "p-1"],
    );
    assert.equal(first.next, "page/p-1");
    const two = await call(`${a.url}/v1/machines?namespace=page&limit=2&after=${first.next}`, {
      token: READER,
    });
    const second = two.json<{ items: { name: string }[]; next?: string }>();
    assert.deepEqual(
      second.items.map((i) => i.name),
      ["p-2"],
    );
    assert.equal(second.next, undefined);
  });

  test("YAML and JSON payloads with ?format keep their keys visible", async () => {
    const p = await publish(a, "prod/yaml", "apiVersion: v1\ntoken: s3cret\n", {}); // binary by default
    assert.ok(p.etag);
    const res = await call(`${cfg(a, "prod/yaml")}?format=yaml`, {
      method: "PUT",
      token: ADMIN,
      body: "apiVersion: v1\ntoken: s3cret\n",
    });
    assert.equal(res.status, 200);
    const doc = await call(cfg(a, "prod/yaml"), { token: READER });
    assert.equal(doc.headers.get("content-type"), "application/sops+yaml");
    assert.match(doc.body.toString(), /^apiVersion: ENC\[|^apiVersion: v1/m);
    assert.ok(!doc.body.toString().includes("s3cret"));
    const json = await call(`${cfg(a, "prod/json")}?format=json`, {
      method: "PUT",
      token: ADMIN,
      body: '{"k":"v"}',
    });
    assert.equal(json.status, 201);
    const jdoc = await call(cfg(a, "prod/json"), { token: READER });
    assert.equal(jdoc.headers.get("x-bootseal-format"), "json");
    assert.match(jdoc.body.toString(), /"k": "ENC\[/);
  });

  test("SOPS uploads: accepted as-is when they name a rule key; refused when malformed or foreign", async () => {
    const source = await call(cfg(a, "prod/worker-0"), { token: READER });
    const up = await call(cfg(a, "prod/uploaded"), {
      method: "PUT",
      token: ADMIN,
      body: source.body,
      headers: { "content-type": "application/sops+json" },
    });
    assert.equal(up.status, 201, up.body.toString());
    assert.equal(up.json<PublishResult>().sha256, sha(source.body), "stored byte for byte");
    expectError(
      await call(cfg(a, "prod/bad-upload"), {
        method: "PUT",
        token: ADMIN,
        body: '{"data": "x"',
        headers: { "content-type": "application/sops+json" },
      }),
      400,
      "BAD_INPUT",
    );
    expectError(
      await call(cfg(a, "prod/bad-upload"), {
        method: "PUT",
        token: ADMIN,
        body: "a: 1\n",
        headers: { "content-type": "application/sops+yaml" },
      }),
      400,
      "BAD_INPUT",
    );
    // Encrypted for the `other/` rule's recipient: names none of the keys of prod/'s rule.
    await publish(a, "other/m", "foreign");
    const foreign = await call(cfg(a, "other/m"), { token: READER });
    const refused = await call(cfg(a, "prod/foreign"), {
      method: "PUT",
      token: ADMIN,
      body: foreign.body,
      headers: { "content-type": "application/sops+json" },
    });
    expectError(refused, 400, "BAD_INPUT");
    assert.match(refused.json<{ message: string }>().message, /names none of the master keys/);
  });

  test("AWS KMS (moto): the data key is wrapped with the machine's encryption context", async () => {
    const p = await publish(a, "kms/node-1", payload);
    const doc = await call(cfg(a, "kms/node-1"), { token: p.bootstrapToken });
    assert.equal(doc.status, 200);
    const meta = JSON.parse(doc.body.toString()).sops;
    assert.equal(meta.kms.length, 1);
    assert.equal(meta.kms[0].arn, kmsArn);
    assert.deepEqual(meta.kms[0].context, { "bootseal-machine": "kms/node-1" });
    assert.equal(meta.age.length, 1);
    const file = join(dir, "kms.bin");
    writeFileSync(file, doc.body);
    // Opened with KMS alone (no age identity): the context is in the entry, so decrypt works.
    const opened = await run(process.execPath, [MAIN_TS, "decrypt", file], serviceEnv(), dir);
    assert.equal(opened.status, 0, opened.stderr);
    assert.ok(opened.stdout.equals(payload));
  });

  test("conditional publishes: create-only twice -> 412, stale If-Match -> 412, current If-Match -> 200", async () => {
    const first = await call(cfg(a, "prod/cas"), {
      method: "PUT",
      token: ADMIN,
      body: "v1",
      headers: { "if-none-match": "*" },
    });
    assert.equal(first.status, 201);
    const etag = first.json<PublishResult>().etag;
    expectError(
      await call(cfg(a, "prod/cas"), {
        method: "PUT",
        token: ADMIN,
        body: "v1",
        headers: { "if-none-match": "*" },
      }),
      412,
      "PRECONDITION_FAILED",
    );
    const ok = await call(cfg(a, "prod/cas"), {
      method: "PUT",
      token: ADMIN,
      body: "v2",
      headers: { "if-match": etag },
    });
    assert.equal(ok.status, 200);
    expectError(
      await call(cfg(a, "prod/cas"), {
        method: "PUT",
        token: ADMIN,
        body: "v3",
        headers: { "if-match": etag },
      }),
      412,
      "PRECONDITION_FAILED",
    );
  });

  test("401 without or with a wrong credential, 403 on scope and for another machine's token", async () => {
    expectError(await call(cfg(a, "prod/worker-0")), 401, "UNAUTHORIZED");
    expectError(await call(cfg(a, "prod/worker-0"), { token: "not-a-token" }), 401, "UNAUTHORIZED");
    expectError(
      await call(cfg(a, "prod/worker-0"), { token: `bst.prod.worker-0.${"A".repeat(43)}` }),
      401,
      "UNAUTHORIZED",
    );
    expectError(await call(cfg(a, "prod/x"), { method: "PUT", token: READER, body: "x" }), 403, "FORBIDDEN");
    expectError(await call(st(a, "prod/worker-0"), { token: WRITER }), 403, "FORBIDDEN");
    expectError(await call(`${a.url}/v1/machines`, { token: WRITER }), 403, "FORBIDDEN");
    // machine A's token on machine B
    expectError(await call(cfg(a, "prod/uses"), { token: pub.bootstrapToken }), 403, "FORBIDDEN");
    expectError(await report(a, "prod/uses", pub.bootstrapToken, { phase: "running" }), 403, "FORBIDDEN");
    // a machine token cannot publish, a controller cannot post a machine's status
    expectError(
      await call(cfg(a, "prod/worker-0"), { method: "PUT", token: pub.bootstrapToken, body: "x" }),
      403,
    );
    expectError(await report(a, "prod/worker-0", ADMIN, { phase: "running" }), 403, "FORBIDDEN");
  });

  test("400 for bad names, phases, oversized fields and bodies; 413 over the size limit; 404", async () => {
    expectError(await call(cfg(a, "Prod/x"), { method: "PUT", token: ADMIN, body: "x" }), 400, "BAD_INPUT");
    expectError(await call(cfg(a, `prod/${"a".repeat(64)}`), { token: ADMIN }), 400, "BAD_INPUT");
    expectError(await call(cfg(a, "prod/x-"), { token: ADMIN }), 400, "BAD_INPUT");
    expectError(await call(cfg(a, "prod/a.b"), { token: ADMIN }), 400, "BAD_INPUT");
    expectError(
      await call(cfg(a, "prod/empty"), { method: "PUT", token: ADMIN, body: "" }),
      400,
      "BAD_INPUT",
    );
    const token = pub.bootstrapToken;
    expectError(await report(a, "prod/worker-0", token, { phase: "published" }), 400, "BAD_INPUT");
    expectError(await report(a, "prod/worker-0", token, { phase: "exploded" }), 400, "BAD_INPUT");
    expectError(await report(a, "prod/worker-0", token, { phase: "failed", message: "é".repeat(2100) }), 400);
    expectError(await report(a, "prod/worker-0", token, { phase: "failed", output: "x".repeat(17000) }), 400);
    expectError(await report(a, "prod/worker-0", token, { phase: "failed", extra: 1 }), 400, "BAD_INPUT");
    expectError(
      await call(st(a, "prod/worker-0"), {
        method: "POST",
        token,
        headers: { "content-type": "application/json" },
        body: "{",
      }),
      400,
      "BAD_INPUT",
    );
    expectError(
      await call(cfg(a, "prod/big"), { method: "PUT", token: ADMIN, body: Buffer.alloc(70_000, 1) }),
      413,
      "TOO_LARGE",
    );
    expectError(await call(cfg(a, "prod/never"), { token: ADMIN }), 404, "NOT_FOUND");
    expectError(await call(st(a, "prod/never"), { token: ADMIN }), 404, "NOT_FOUND");
    expectError(await call(cfg(a, "prod/never"), { method: "DELETE", token: ADMIN }), 404, "NOT_FOUND");
  });

  test("DELETE removes config and token", async () => {
    const p = await publish(a, "prod/gone", "x");
    assert.equal((await call(cfg(a, "prod/gone"), { method: "DELETE", token: ADMIN })).status, 204);
    expectError(await call(cfg(a, "prod/gone"), { token: ADMIN }), 404, "NOT_FOUND");
    expectError(await call(cfg(a, "prod/gone"), { token: p.bootstrapToken }), 401, "UNAUTHORIZED");
    // a machine may not delete its config when one-time fetch is off
    const q = await publish(a, "prod/keep", "x");
    expectError(
      await call(cfg(a, "prod/keep"), { method: "DELETE", token: q.bootstrapToken }),
      403,
      "FORBIDDEN",
    );
  });

  test("token expiry (ttl 1s) -> 401 TOKEN_EXPIRED", async () => {
    const p = await publish(b, "prod/expiring", "x");
    await new Promise((r) => setTimeout(r, 1200));
    expectError(await call(cfg(b, "prod/expiring"), { token: p.bootstrapToken }), 401, "TOKEN_EXPIRED");
    expectError(
      await report(b, "prod/expiring", p.bootstrapToken, { phase: "running" }),
      401,
      "TOKEN_EXPIRED",
    );
  });

  test("one-time fetch after-first-fetch: the config is gone after one fetch", async () => {
    const p = await publish(b, "prod/once", "x");
    assert.equal((await call(cfg(b, "prod/once"), { token: p.bootstrapToken })).status, 200);
    expectError(await call(cfg(b, "prod/once"), { token: p.bootstrapToken }), 409, "ALREADY_FETCHED");
    expectError(await call(cfg(b, "prod/once"), { token: ADMIN }), 404, "NOT_FOUND");
    const status = await call(st(b, "prod/once"), { token: ADMIN });
    assert.equal(status.json<{ published: boolean }>().published, false);
  });

  test("one-time fetch after-success: succeeded deletes the config and retires the token", async () => {
    const p = await publish(c, "prod/success", "x");
    assert.equal((await call(cfg(c, "prod/success"), { token: p.bootstrapToken })).status, 200);
    assert.equal(
      (await call(cfg(c, "prod/success"), { token: p.bootstrapToken })).status,
      200,
      "fetch retries allowed",
    );
    assert.equal((await report(c, "prod/success", p.bootstrapToken, { phase: "succeeded" })).status, 200);
    expectError(await call(cfg(c, "prod/success"), { token: ADMIN }), 404, "NOT_FOUND");
    expectError(await call(cfg(c, "prod/success"), { token: p.bootstrapToken }), 404, "NOT_FOUND");
    // `bootseal fetch --one-time` sends its DELETE next: done already, 204, and the token goes.
    assert.equal(
      (await call(cfg(c, "prod/success"), { method: "DELETE", token: p.bootstrapToken })).status,
      204,
    );
    expectError(await call(cfg(c, "prod/success"), { token: p.bootstrapToken }), 401, "UNAUTHORIZED");
    assert.equal(
      (await call(st(c, "prod/success"), { token: ADMIN })).json<{ phase: string }>().phase,
      "succeeded",
    );
  });

  test("server-sent events: a status change is delivered; Last-Event-ID resumes", async () => {
    const p = await publish(a, "sse/m-1", "x");
    const events = await openEvents(a, ADMIN);
    await report(a, "sse/m-1", p.bootstrapToken, { phase: "fetching" });
    const first = await events.next((e) => e.data.name === "m-1" && e.data.phase === "fetching");
    await events.close();
    await report(a, "sse/m-1", p.bootstrapToken, { phase: "decrypted" });
    await report(a, "sse/m-1", p.bootstrapToken, { phase: "written" });
    const resumed = await openEvents(a, ADMIN, String(first.id));
    const missed = [
      await resumed.next((e) => e.data.name === "m-1"),
      await resumed.next((e) => e.data.name === "m-1"),
    ];
    assert.deepEqual(
      missed.map((e) => e.data.phase),
      ["decrypted", "written"],
    );
    assert.ok(missed[0]!.id > first.id && missed[1]!.id > missed[0]!.id, "ids increase");
    const beat = await resumed.heartbeat();
    assert.ok(beat);
    await resumed.close();
  });

  test("userdata (POST) renders a stub with a FRESH token; the previous token stops working", async () => {
    const p = await publish(c, "prod/ud", "x");
    const ud = (format: string, token = ADMIN) =>
      call(`${c.url}/v1/machines/prod/ud/userdata?format=${format}`, { method: "POST", token });
    const res = await ud("cloud-init");
    assert.equal(res.status, 200, res.body.toString());
    assert.match(res.headers.get("content-type") ?? "", /^text\/cloud-config/);
    const stub = res.body.toString();
    const fresh = /bst\.prod\.ud\.[A-Za-z0-9_-]{43}/.exec(stub)?.[0];
    assert.ok(fresh, "the stub carries a bootstrap token");
    assert.notEqual(fresh, p.bootstrapToken);
    assert.ok(stub.includes("https://bootseal.example.test"));
    expectError(await call(cfg(c, "prod/ud"), { token: p.bootstrapToken }), 401, "UNAUTHORIZED");
    assert.equal((await call(cfg(c, "prod/ud"), { token: fresh })).status, 200);
    for (const format of ["ignition", "powershell"]) assert.equal((await ud(format)).status, 200, format);
    expectError(await ud("nope"), 400, "BAD_INPUT");
    expectError(await ud("cloud-init", READER), 403, "FORBIDDEN");
    expectError(
      await call(`${c.url}/v1/machines/prod/none/userdata?format=ignition`, { method: "POST", token: ADMIN }),
      404,
    );
    // No derivation key in this configuration: GET cannot render the stub twice and says so.
    expectError(await call(`${c.url}/v1/machines/prod/ud/userdata?format=ignition`, { token: ADMIN }), 409);
    // No executable to serve: 501, and nothing is minted.
    expectError(
      await call(`${a.url}/v1/machines/prod/worker-0/userdata?format=cloud-init`, { token: ADMIN }),
      501,
    );
  });

  test("metrics, docs, health", async () => {
    const metrics = (await call(`${a.url}/metrics`)).body.toString();
    assert.match(
      metrics,
      /bootseal_http_requests_total\{method="put",route="\/v1\/machines\/:ns\/:name\/config",status="201"\}/,
    );
    assert.match(metrics, /bootseal_publishes_total\{outcome="ok"\}/);
    assert.match(metrics, /bootseal_status_posts_total\{phase="succeeded"\}/);
    assert.match(metrics, /bootseal_store_operation_duration_seconds_count\{op="put",outcome="ok"\}/);
    assert.match(
      metrics,
      /bootseal_key_operation_duration_seconds_count\{kind="kms",op="wrap",outcome="ok"\}/,
    );
    const spec = await call(`${a.url}/docs/openapi.json`);
    assert.equal(spec.json<{ openapi: string }>().openapi, "3.0.3");
    assert.equal((await call(`${a.url}/docs`)).status, 200);
    assert.equal((await whenReady(a.url)).status, "ready");
  });
});

describe("bootseal serve (SeaweedFS S3, two replicas on one bucket)", () => {
  test("publish on one replica; fetch, report and read status on the other", async () => {
    const p = await publish(s1, "fleet/node-0", "join me");
    const doc = await call(cfg(s2, "fleet/node-0"), { token: p.bootstrapToken });
    assert.equal(doc.status, 200);
    assert.equal(sha(doc.body), p.sha256);
    assert.equal((await report(s2, "fleet/node-0", p.bootstrapToken, { phase: "succeeded" })).status, 200);
    const status = await call(st(s1, "fleet/node-0"), { token: READER });
    assert.equal(status.json<{ phase: string }>().phase, "succeeded");
    assert.equal((await whenReady(s2.url)).status, "ready");
  });

  test("two concurrent publishes with the same If-Match: exactly one wins, the other gets 412", async () => {
    const first = await publish(s1, "fleet/race", "v1");
    const put = (s: Served, body: string) =>
      call(cfg(s, "fleet/race"), { method: "PUT", token: ADMIN, body, headers: { "if-match": first.etag } });
    const results = await Promise.all([put(s1, "from-s1"), put(s2, "from-s2")]);
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 412], results.map((r) => r.body.toString()).join(" | "));
  });

  test("status posts from both replicas at once all land (compare-and-swap retries)", async () => {
    const p = await publish(s1, "fleet/busy", "x");
    const posts = Array.from({ length: 8 }, (_, i) =>
      // A terminal phase: written before its answer (a machine retrying its bootstrap).
      report(i % 2 ? s1 : s2, "fleet/busy", p.bootstrapToken, { phase: "failed", attempt: i }),
    );
    for (const r of await Promise.all(posts)) assert.equal(r.status, 200);
    const rec = (await call(st(s2, "fleet/busy"), { token: READER })).json<{ history: unknown[] }>();
    assert.equal(rec.history.length, 9);
  });
});

describe("bootseal serve (store down)", () => {
  test("503 with Retry-After when the store is unreachable; readyz says unavailable", async () => {
    const res = await call(cfg(down, "prod/x"), { method: "PUT", token: ADMIN, body: "x" });
    expectError(res, 503, "STORE_UNAVAILABLE");
    assert.ok(Number(res.headers.get("retry-after")) > 0);
    const ready = await call(`${down.url}/readyz`);
    assert.equal(ready.status, 503);
    assert.ok(ready.headers.get("retry-after"));
    const body = ready.json<{ status: string; checks: Record<string, string> }>();
    assert.equal(body.status, "unavailable");
    assert.equal(body.checks.store, "unavailable");
    assert.deepEqual(Object.keys(body.checks).sort(), ["artifacts", "store"]);
    expectError(await call(st(down, "prod/x"), { token: ADMIN }), 503, "STORE_UNAVAILABLE");
  });
});

describe("logs", () => {
  test("access and audit logs carry no payload canary and no token; the audit log has one line per action", async () => {
    const audits = all().map((s) => {
      const name = /audit-(\w+)\.log/.exec(s.output())?.[1];
      return name ? readFileSync(join(dir, `audit-${name}.log`), "utf8") : "";
    });
    const logs =
      all()
        .map((s) => s.output())
        .join("\n") + audits.join("\n");
    assert.ok(logs.includes('"reqId"'), "the access log is there");
    assert.equal(statSync(join(dir, "audit-a.log")).mode & 0o777, 0o600, "audit.mode's default");
    assert.ok(!logs.includes(CANARY), "the payload canary never reaches a log");
    for (const t of [ADMIN, READER, WRITER]) assert.ok(!logs.includes(t), "no controller token in the logs");
    assert.ok(!/bst\.[a-z0-9-]+\.[a-z0-9-]+\.[A-Za-z0-9_-]{43}/.test(logs), "no bootstrap token in the logs");
    const lines = (audits[0] ?? "")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    const actions = new Set(lines.map((l) => `${l.action}:${l.outcome}`));
    for (const want of ["publish:ok", "fetch:ok", "status:ok", "delete:ok", "fetch:denied", "auth:denied"]) {
      assert.ok(actions.has(want), `audit has ${want}: ${[...actions].join(", ")}`);
    }
    const fetchLine = lines.find(
      (l) => l.action === "fetch" && l.outcome === "ok" && l.who.startsWith("machine:"),
    );
    assert.ok(fetchLine, "a machine fetch is audited with the machine as who");
    for (const k of ["who", "machine", "action", "outcome", "reqId", "source"]) assert.ok(k in fetchLine, k);
  });
});

describe("shutdown", () => {
  test("SIGTERM with an open event stream: the stream is closed and the process exits 0", async () => {
    const events = await openEvents(b, ADMIN);
    const started = Date.now();
    assert.equal(await b.stop(), 0);
    assert.ok(Date.now() - started < 5000, "the open stream did not hold the close up");
    await events.close();
  });
});

interface SseEvent {
  id: number;
  data: { namespace: string; name: string; phase: string; version: number };
}

async function openEvents(s: Served, token: string, lastEventId?: string) {
  const abort = new AbortController();
  const res = await fetch(`${s.url}/v1/events`, {
    headers: { authorization: `Bearer ${token}`, ...(lastEventId ? { "last-event-id": lastEventId } : {}) },
    signal: abort.signal,
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
  const reader = res.body!.getReader();
  const queue: SseEvent[] = [];
  let buffer = "";
  let beats = 0;
  const pump = async (): Promise<void> => {
    const { value, done } = await reader.read();
    if (done) throw new Error("event stream ended");
    buffer += Buffer.from(value).toString();
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (block.includes(": heartbeat")) beats++;
      const id = /^id: (\d+)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (id && data) queue.push({ id: Number(id), data: JSON.parse(data) });
      end = buffer.indexOf("\n\n");
    }
  };
  const deadline = () => Date.now() + 5000;
  return {
    async next(pred: (e: SseEvent) => boolean): Promise<SseEvent> {
      const until = deadline();
      for (;;) {
        const i = queue.findIndex(pred);
        if (i >= 0) return queue.splice(i, 1)[0]!;
        if (Date.now() > until) throw new Error("no matching event");
        await pump();
      }
    },
    async heartbeat(): Promise<boolean> {
      const until = deadline();
      while (beats === 0 && Date.now() < until) await pump();
      return beats > 0;
    },
    async close() {
      abort.abort();
      await reader.cancel().catch(() => {});
    },
  };
}
