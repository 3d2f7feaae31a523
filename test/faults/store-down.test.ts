/**
 * The store down in the middle of a boot storm: a real `bootseal serve` on SeaweedFS through
 * a proxy the test takes down (the shared peer keeps running). 30 machines are published,
 * then fetched by in-process `bootseal fetch` runs (6 at a time, each with a 4-minute
 * deadline) that report their phases. After the first fetches succeeded the proxy goes down;
 * the test waits for the service to say so (readyz 503, a config GET 503 STORE_UNAVAILABLE with
 * `Retry-After`) and for a fetcher to retry; then the proxy comes back and the service recovers
 * by itself (readyz 200). Every fetcher succeeds with its own payload, every stored object
 * parses (configs decrypt, records are JSON).
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, test } from "node:test";
import {
  CreateBucketCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  type S3Client,
} from "@aws-sdk/client-s3";
import { main } from "../../src/cli/main.ts";
import { type AgeKey, ageKey, REPO, tempDir } from "../fetcher/helpers.ts";
import { uniqueName } from "../helpers/peers.ts";
import { rawS3, removeS3Bucket, seaweedfs } from "../helpers/s3.ts";
import { type Service, startService } from "../helpers/serve-process.ts";
import { type TcpProxy, tcpProxy } from "../helpers/tcp-proxy.ts";
import { until } from "../helpers/until.ts";
import { call, decryptWithAge, serviceConfig } from "./helpers.ts";

const MACHINES = 30;
const CONCURRENCY = 6;
const DOWN_AFTER = 3;

let dir: { path: string; remove: () => Promise<void> };
let s3: S3Client;
let bucket: string;
let proxy: TcpProxy;
let service: Service;
let operator: AgeKey;
const token = randomBytes(24).toString("hex");

before(async () => {
  dir = await tempDir("faults-storm");
  const p = seaweedfs();
  s3 = rawS3(p);
  bucket = uniqueName("faults-storm");
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  proxy = await tcpProxy(new URL(p.endpoint));
  operator = await ageKey(dir.path, "operator");
  const config = join(dir.path, "serve.yaml");
  await writeFile(
    config,
    serviceConfig({
      store: `s3://${bucket}/storm`,
      extra: ["s3:", `  endpoint: ${proxy.url}`, "  region: us-east-1", "  forcePathStyle: true"],
      recipient: operator.recipient,
      tokenSha256: createHash("sha256").update(token).digest("hex"),
      dataDir: join(dir.path, "data"),
      audit: join(dir.path, "audit.log"),
    }),
  );
  service = await startService(config, {
    PATH: process.env.PATH,
    HOME: dir.path,
    AWS_ACCESS_KEY_ID: p.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: p.credentials.secretAccessKey,
    AWS_REGION: "us-east-1",
  });
});

after(async () => {
  await service?.stop();
  await proxy?.close();
  if (bucket) await removeS3Bucket(seaweedfs(), bucket).catch(() => {});
  s3?.destroy();
  await dir?.remove();
});

/** One `bootseal fetch` run in this process; its exit code and stderr (watched by `onErr`). */
async function fetchRun(
  args: readonly string[],
  onErr: (text: string) => void,
): Promise<{ code: number; err: string }> {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let err = "";
  stdout.resume();
  stderr.on("data", (c: Buffer) => {
    err += c.toString();
    onErr(err);
  });
  stdin.end();
  const code = await main(["fetch", ...args], {
    stdin,
    stdout,
    stderr,
    env: { SOPS_AGE_KEY_FILE: operator.file, HOME: dir.path },
    cwd: REPO,
  });
  return { code, err };
}

test("the store down in a boot storm: 503 + Retry-After, recovery, every fetcher succeeds", {
  timeout: 600_000,
}, async (t) => {
  const url = service.url;
  const machines: Array<{ name: string; payload: string; tokenFile: string }> = [];
  for (let i = 0; i < MACHINES; i++) {
    const name = `storm-${i}`;
    const payload = `payload of ${name} ${randomBytes(6).toString("hex")}\n`;
    const r = await call(`${url}/v1/machines/default/${name}/config`, {
      method: "PUT",
      token,
      body: payload,
    });
    assert.equal(r.status, 201, r.body.toString());
    const tokenFile = join(dir.path, `${name}.token`);
    await writeFile(tokenFile, r.json<{ bootstrapToken: string }>().bootstrapToken, { mode: 0o600 });
    machines.push({ name, payload, tokenFile });
  }

  const state = { succeeded: 0, retried: false, down: false };
  const results: Array<{ name: string; code: number; err: string }> = [];
  let next = 0;
  const worker = async () => {
    for (;;) {
      const m = machines[next++];
      if (!m) return;
      const root = join(dir.path, `root-${m.name}`);
      await mkdir(root);
      const r = await fetchRun(
        [
          "--from",
          `${url}/v1/machines/default/${m.name}/config`,
          "--token-file",
          m.tokenFile,
          "--out",
          "/var/lib/bootseal/payload",
          "--root",
          root,
          "--deadline",
          "4m",
          "--attempt-timeout",
          "20s",
        ],
        (err) => {
          // A failed download attempt (the fetcher logs one line per attempt).
          if (state.down && /attempt \d+ GET [^\n]*: (?!ok)/.test(err)) state.retried = true;
        },
      );
      results.push({ name: m.name, ...r });
      if (r.code === 0) state.succeeded++;
      if (r.code === 0 && (await readFile(join(root, "var/lib/bootseal/payload"), "utf8")) !== m.payload) {
        throw new Error(`${m.name}: wrong payload`);
      }
    }
  };
  const storm = Promise.all(Array.from({ length: CONCURRENCY }, worker));

  await until("the first answers", () => state.succeeded >= DOWN_AFTER);
  proxy.setDown(true);
  state.down = true;
  await until("readyz 503", async () => (await call(`${url}/readyz`)).status === 503);
  const ready = await call(`${url}/readyz`);
  assert.ok(ready.headers.get("retry-after"), "readyz 503 has Retry-After");
  const probe = await call(`${url}/v1/machines/default/storm-0/config`, { token });
  assert.equal(probe.status, 503, probe.body.toString());
  assert.equal(probe.headers.get("retry-after"), "5");
  assert.equal(probe.json<{ code: string }>().code, "STORE_UNAVAILABLE");
  assert.deepEqual(Object.keys(probe.json()).sort(), ["code", "message"]);
  const fetchedWhileUp = state.succeeded;
  await until("a fetcher retrying", () => state.retried || next >= MACHINES);
  proxy.setDown(false);
  await until("readyz 200", async () => (await call(`${url}/readyz`)).status === 200);
  await storm;

  const failed = results.filter((r) => r.code !== 0);
  assert.deepEqual(
    failed.map((r) => `${r.name}: ${r.code} ${r.err.slice(-300)}`),
    [],
    "every fetcher succeeds",
  );
  assert.equal(results.length, MACHINES);
  t.diagnostic(
    `${fetchedWhileUp} fetches done before the store went down, ${MACHINES - fetchedWhileUp} during or after`,
  );

  const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: "storm/", MaxKeys: 1000 }));
  let configs = 0;
  for (const o of listed.Contents ?? []) {
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: o.Key }));
    const body = Buffer.from(await got.Body!.transformToByteArray());
    if (o.Key?.startsWith("storm/configs/")) {
      await decryptWithAge(dir.path, body, operator.file);
      configs++;
    } else JSON.parse(body.toString());
  }
  assert.equal(configs, MACHINES);
  for (const m of machines) {
    const st = await call(`${url}/v1/machines/default/${m.name}/status`, { token });
    assert.equal(st.status, 200, st.body.toString());
  }
});
