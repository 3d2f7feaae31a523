/**
 * AWS KMS down during publishes: the creation rule has an AWS KMS key (moto) and an age key;
 * the service reaches KMS through a proxy the test takes down. While down, a publish (a new
 * machine and a republish) answers 503 KEY_UNAVAILABLE with `Retry-After` and stores nothing:
 * GET 404 for the new machine, no file for it in the store, the old document unchanged. Back
 * up, the same publish succeeds and the stored document has every key of its rule.
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { CreateKeyCommand, KMSClient } from "@aws-sdk/client-kms";
import { type AgeKey, ageKey, tempDir } from "../fetcher/helpers.ts";
import { peer } from "../helpers/peers.ts";
import { type Service, startService } from "../helpers/serve-process.ts";
import { type TcpProxy, tcpProxy } from "../helpers/tcp-proxy.ts";
import { call, decryptWithAge, serviceConfig } from "./helpers.ts";

const REGION = "us-east-1";
let dir: { path: string; remove: () => Promise<void> };
let proxy: TcpProxy;
let service: Service;
let operator: AgeKey;
let kmsArn: string;
const token = randomBytes(24).toString("hex");

before(async () => {
  dir = await tempDir("faults-kms");
  const kms = new KMSClient({
    endpoint: peer("KMS_MOTO_ENDPOINT"),
    region: REGION,
    credentials: { accessKeyId: "svc", secretAccessKey: "svc" },
  });
  kmsArn = (await kms.send(new CreateKeyCommand({ Description: "bootseal faults kms-down" }))).KeyMetadata!
    .Arn!;
  kms.destroy();
  proxy = await tcpProxy(new URL(peer("KMS_MOTO_ENDPOINT")));
  operator = await ageKey(dir.path, "operator");
  const config = join(dir.path, "serve.yaml");
  await writeFile(
    config,
    serviceConfig({
      store: `file://${join(dir.path, "store")}`,
      recipient: operator.recipient,
      kms: kmsArn,
      tokenSha256: createHash("sha256").update(token).digest("hex"),
      dataDir: join(dir.path, "data"),
      audit: join(dir.path, "audit.log"),
    }),
  );
  service = await startService(config, {
    PATH: process.env.PATH,
    HOME: dir.path,
    AWS_ACCESS_KEY_ID: "svc",
    AWS_SECRET_ACCESS_KEY: "svc",
    AWS_REGION: REGION,
    AWS_ENDPOINT_URL_KMS: proxy.url,
  });
});

after(async () => {
  await service?.stop();
  await proxy?.close();
  await dir?.remove();
});

const machine = (name: string) => `${service.url}/v1/machines/default/${name}/config`;

async function storedFiles(): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(join(dir.path, "store"), { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(join(e.parentPath, e.name).slice(join(dir.path, "store").length + 1));
  }
  return out.sort();
}

test("KMS down: 503 KEY_UNAVAILABLE with Retry-After, nothing stored; back up: every key of the rule", {
  timeout: 300_000,
}, async () => {
  const first = await call(machine("old"), { method: "PUT", token, body: "old payload\n" });
  assert.equal(first.status, 201, first.body.toString());
  const oldDoc = (await call(machine("old"), { token })).body;
  const filesBefore = await storedFiles();

  proxy.setDown(true);
  for (const name of ["new", "old"]) {
    const r = await call(machine(name), { method: "PUT", token, body: "new payload\n" });
    assert.equal(r.status, 503, `${name}: ${r.body.toString()}`);
    assert.equal(r.headers.get("retry-after"), "5");
    const body = r.json<{ code: string; message: string }>();
    assert.deepEqual(Object.keys(body).sort(), ["code", "message"]);
    assert.equal(body.code, "KEY_UNAVAILABLE");
  }
  assert.equal((await call(machine("new"), { token })).status, 404);
  const kept = await call(machine("old"), { token });
  assert.ok(kept.body.equals(oldDoc), "the old document is unchanged");
  const filesDown = (await storedFiles()).filter((f) => !f.startsWith("status/") && !f.startsWith("tokens/"));
  assert.deepEqual(
    filesDown,
    filesBefore.filter((f) => !f.startsWith("status/") && !f.startsWith("tokens/")),
    "no config object was written while KMS was down",
  );
  assert.ok(!(await storedFiles()).some((f) => f.includes("new")), "nothing at all for the new machine");

  proxy.setDown(false);
  const again = await call(machine("new"), { method: "PUT", token, body: "new payload\n" });
  assert.equal(again.status, 201, again.body.toString());
  const doc = (await call(machine("new"), { token })).body;
  const sops = (
    JSON.parse(doc.toString()) as {
      sops: { kms?: Array<{ arn: string }>; age?: Array<{ recipient: string }> };
    }
  ).sops;
  assert.deepEqual(
    sops.kms?.map((k) => k.arn),
    [kmsArn],
  );
  assert.deepEqual(
    sops.age?.map((k) => k.recipient),
    [operator.recipient],
  );
  assert.equal((await decryptWithAge(dir.path, doc, operator.file)).toString(), "new payload\n");
});
