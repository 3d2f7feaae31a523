/**
 * The machine side end to end on loopback: the real `bootseal serve` process with its store in
 * SeaweedFS (through a proxy this test can take down) and AWS KMS on moto; every fetch its own
 * process with a temporary --root, the machine's KMS access from its own AWS variables.
 *
 * Happy path: publish for default/m1, fetch with the bootstrap token, check bytes, modes,
 * marker, sentinel (after --exec) and the phase history ending in succeeded. Failure paths, each with its
 * reported phase and code and nothing written: wrong key, machine B's encryption context,
 * tampered document, expired token, another machine's token, the store down for the first
 * attempts (succeeds after retries), the service down past the deadline, --exec exiting 1,
 * a manifest path outside the allowed roots. The single executable, built here, fetches from
 * the service too.
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { CreateKeyCommand, KMSClient } from "@aws-sdk/client-kms";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { builtSea } from "../helpers/built-sea.ts";
import { peer, uniqueName } from "../helpers/peers.ts";
import { freePort } from "../helpers/ports.ts";
import { type Service, startService } from "../helpers/serve-process.ts";
import { type TcpProxy, tcpProxy } from "../helpers/tcp-proxy.ts";
import {
  type AgeKey,
  ageKey,
  assertManifestWritten,
  MANIFEST,
  machineEnv,
  type RunResult,
  run,
  tempDir,
} from "./helpers.ts";

const REGION = "us-east-1";

let dir: { path: string; remove: () => Promise<void> };
let s3: S3Client;
let bucket: string;
let proxy: TcpProxy;
let kmsArn: string;
let operator: AgeKey;
let stranger: AgeKey;
let controllerToken: string;
let controllerTokenFile: string;
let service: Service;
let shortService: Service;
const machineAws: Record<string, string> = {};

function writeConfig(path: string, prefix: string, ttl: string): Promise<void> {
  const lines = [
    `store: s3://${bucket}/${prefix}`,
    "s3:",
    `  endpoint: ${proxy.url}`,
    `  region: ${REGION}`,
    "  forcePathStyle: true",
    "creation_rules:",
    "  - path_regex: ^default/wrongkey$",
    `    age: ${stranger.recipient}`,
    "  - path_regex: .*",
    `    kms: ${kmsArn}`,
    `    age: ${operator.recipient}`,
    "controllers:",
    "  - name: e2e",
    `    tokenSha256: ${createHash("sha256").update(controllerToken).digest("hex")}`,
    "    scopes: [configs:write, tokens:mint, configs:read, status:read]",
    "bootstrapToken:",
    `  ttl: ${ttl}`,
    "  uses: 20",
    `dataDir: ${join(dir.path, `data-${prefix}`)}`,
    "audit:",
    `  path: ${join(dir.path, `audit-${prefix}.log`)}`,
    "logLevel: warn",
    "",
  ];
  return writeFile(path, lines.join("\n"));
}

before(async () => {
  dir = await tempDir("e2e");
  const seaweed = peer("S3_SEAWEEDFS_ENDPOINT");
  const credentials = {
    accessKeyId: peer("S3_SEAWEEDFS_ACCESS_KEY"),
    secretAccessKey: peer("S3_SEAWEEDFS_SECRET_KEY"),
  };
  s3 = new S3Client({ endpoint: seaweed, region: REGION, forcePathStyle: true, credentials });
  bucket = uniqueName("fetcher-e2e");
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  proxy = await tcpProxy(new URL(seaweed));

  const kms = new KMSClient({
    endpoint: peer("KMS_MOTO_ENDPOINT"),
    region: REGION,
    credentials: { accessKeyId: "machine", secretAccessKey: "machine" },
  });
  kmsArn = (await kms.send(new CreateKeyCommand({ Description: "bootseal fetcher e2e" }))).KeyMetadata!.Arn!;
  Object.assign(machineAws, {
    AWS_ACCESS_KEY_ID: "machine-role",
    AWS_SECRET_ACCESS_KEY: "machine-role",
    AWS_REGION: REGION,
    AWS_ENDPOINT_URL_KMS: peer("KMS_MOTO_ENDPOINT"),
  });

  operator = await ageKey(dir.path, "operator");
  stranger = await ageKey(dir.path, "stranger");
  controllerToken = randomBytes(24).toString("hex");
  controllerTokenFile = join(dir.path, "controller-token");
  await writeFile(controllerTokenFile, controllerToken, { mode: 0o600 });

  const serviceEnv = {
    PATH: process.env.PATH,
    HOME: dir.path,
    AWS_ACCESS_KEY_ID: credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    AWS_REGION: REGION,
    AWS_ENDPOINT_URL_KMS: peer("KMS_MOTO_ENDPOINT"),
  };
  await writeConfig(join(dir.path, "main.yaml"), "main", "1h");
  await writeConfig(join(dir.path, "short.yaml"), "short", "2s");
  service = await startService(join(dir.path, "main.yaml"), serviceEnv);
  shortService = await startService(join(dir.path, "short.yaml"), serviceEnv);
});

after(async () => {
  await service?.stop();
  await shortService?.stop();
  await proxy?.close();
  if (s3 && bucket) {
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
    for (const o of listed.Contents ?? [])
      await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: o.Key! }));
    await s3.send(new DeleteBucketCommand({ Bucket: bucket })).catch(() => {});
  }
  await dir?.remove();
});

/** Publishes through `bootseal publish`; returns the bootstrap token file (0600). */
async function publish(
  machine: string,
  body: string | Uint8Array,
  svc: Service = service,
  extra: string[] = [],
): Promise<string> {
  const file = join(dir.path, `payload-${machine.replace("/", "-")}-${randomBytes(3).toString("hex")}`);
  await writeFile(file, body);
  const tokenFile = `${file}.token`;
  const r = await run(
    [
      "publish",
      "--server",
      svc.url,
      "--machine",
      machine,
      "--token-file",
      controllerTokenFile,
      "--bootstrap-token-out",
      tokenFile,
      ...extra,
      file,
    ],
    machineEnv(),
  );
  assert.equal(r.code, 0, r.stderr);
  assert.ok(!r.stdout.includes(controllerToken));
  return tokenFile;
}

async function history(machine: string, svc: Service = service): Promise<Array<Record<string, unknown>>> {
  const r = await run(
    ["status", "--server", svc.url, "--token-file", controllerTokenFile, "--json", machine],
    machineEnv(),
  );
  assert.equal(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as { history: Array<Record<string, unknown>> }).history;
}

async function newRoot(): Promise<string> {
  const root = join(dir.path, `root-${randomBytes(4).toString("hex")}`);
  await mkdir(root);
  return root;
}

async function listAll(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string, rel: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      if (e.isDirectory()) await walk(join(d, e.name), `${rel}/${e.name}`);
      else out.push(`${rel}/${e.name}`);
    }
  };
  await walk(root, "");
  return out.sort();
}

function fetchArgs(
  svc: Service,
  machine: string,
  tokenFile: string,
  root: string,
  ...extra: string[]
): string[] {
  return [
    "fetch",
    "--from",
    `${svc.url}/v1/machines/${machine}/config`,
    "--token-file",
    tokenFile,
    "--apply",
    "--root",
    root,
    ...extra,
  ];
}

async function fetchAs(
  machine: string,
  tokenFile: string,
  extra: string[] = [],
  env: Record<string, string> = machineAws,
  command?: string,
  svc: Service = service,
): Promise<{ r: RunResult; root: string }> {
  const root = await newRoot();
  const r = await run(fetchArgs(svc, machine, tokenFile, root, ...extra), machineEnv(env), command);
  return { r, root };
}

/** `ran`: the run had a bootstrap command (--exec); without one there is no sentinel. */
async function checkHappy(root: string, ran = false): Promise<void> {
  await assertManifestWritten(root);
  const sentinel = join(root, "run/cluster-api/bootstrap-success.complete");
  if (ran) assert.equal(await readFile(sentinel, "utf8"), "success\n");
  else await assert.rejects(stat(sentinel), { code: "ENOENT" });
  const marker = JSON.parse(await readFile(join(root, "var/lib/bootseal/bootstrap.done"), "utf8"));
  assert.match(String(marker.etag), /^"/);
}

test("default/m1: publish, fetch with the bootstrap token and the machine's KMS access, phases end in succeeded", async () => {
  const token = await publish("default/m1", MANIFEST);
  // The stored document is wrapped by KMS with m1's context and by the operator's age key;
  // the machine has no age key, so KMS is what opens it.
  const stored = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "main/configs/default/m1" }));
  const doc = JSON.parse(await stored.Body!.transformToString());
  assert.equal(doc.sops.kms[0].context["bootseal-machine"], "default/m1");

  const { r, root } = await fetchAs("default/m1", token, ["--exec", "echo kubeadm join ok"]);
  assert.equal(r.code, 0, r.stderr);
  await checkHappy(root, true);
  assert.match(r.stdout, /kubeadm join ok/);
  assert.match(r.stderr, /attempt 1 GET http:\/\/127\.0\.0\.1:\d+\/v1\/machines\/default\/m1\/config: ok/);
  const token2 = (await readFile(token, "utf8")).trim();
  assert.ok(!r.stderr.includes(token2), "the bootstrap token is never logged");
  assert.ok(!r.stderr.includes("s3cr3t"), "the plaintext is never logged");
  const h = await history("default/m1");
  assert.deepEqual(
    h.map((e) => e.phase),
    ["published", "fetching", "decrypted", "written", "running", "succeeded"],
  );
  assert.equal(h.at(-1)!.exitCode, 0);
  assert.match(String(h.at(-1)!.output), /kubeadm join ok/);

  // a reboot: the marker makes it a no-op, nothing fetched, nothing reported
  const again = await run(fetchArgs(service, "default/m1", token, root), machineEnv(machineAws));
  assert.equal(again.code, 0);
  assert.match(again.stderr, /already bootstrapped/);
  assert.equal((await history("default/m1")).length, h.length);
});

async function expectFailed(
  machine: string,
  result: { r: RunResult; root: string },
  exitCode: number,
  reason: string,
  opts: { reported?: boolean; svc?: Service } = {},
): Promise<void> {
  const { r, root } = result;
  assert.equal(r.code, exitCode, r.stderr);
  assert.deepEqual(await listAll(root), [], "nothing written");
  assert.match(r.stderr, new RegExp(`phase failed ${reason}`));
  if (opts.reported !== false) {
    const h = await history(machine, opts.svc);
    assert.equal(h.at(-1)!.phase, "failed");
    assert.match(String(h.at(-1)!.message), new RegExp(`^${reason}: `));
  }
}

test("wrong key: the document is wrapped for a key the machine does not hold", async () => {
  const token = await publish("default/wrongkey", MANIFEST);
  await expectFailed(
    "default/wrongkey",
    await fetchAs("default/wrongkey", token),
    EXIT_CODES.NO_KEY_AVAILABLE,
    "NO_KEY_AVAILABLE",
  );
});

/**
 * An attacker who can write the store replaces a machine's config, and rebinds the machine's
 * token record to it (the service refuses a token bound to another config version: without
 * the rebinding the fetch would already be 401 at the service, checked below). What is left
 * to catch it is the fetcher's own verification.
 */
async function replaceBehindTheService(machine: string, tokenFile: string, body: string | Uint8Array) {
  const [ns, name] = machine.split("/");
  const put = await s3.send(
    new PutObjectCommand({ Bucket: bucket, Key: `main/configs/${ns}/${name}`, Body: body }),
  );
  const unbound = await fetch(`${service.url}/v1/machines/${machine}/config`, {
    headers: { authorization: `Bearer ${(await readFile(tokenFile, "utf8")).trim()}` },
  });
  assert.equal(
    unbound.status,
    401,
    "the service itself refuses the token for a config it did not issue it for",
  );
  const tokenKey = `main/tokens/${ns}/${name}.json`;
  const token = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: tokenKey }));
  const record = JSON.parse(await token.Body!.transformToString());
  record.configEtag = put.ETag;
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: tokenKey, Body: JSON.stringify(record) }));
}

test("machine B's encryption context: refused before any key service is called", async () => {
  // Encrypted by hand for default/m2's context (a process of its own: the AWS SDK reads its
  // credentials from the process environment). The service refuses to publish it for m3 (its
  // keys are not m3's rule's), so it goes into the store behind the service's back, as a
  // compromised store or a copy-paste slip in a controller would put it there.
  const plain = join(dir.path, "m3.manifest");
  const encrypted = join(dir.path, "m3.sops.json");
  await writeFile(plain, MANIFEST);
  const made = await run(
    [
      "encrypt",
      "--kms",
      kmsArn,
      "--encryption-context",
      "bootseal-machine:default/m2",
      "--input-type",
      "binary",
      "--output",
      encrypted,
      plain,
    ],
    machineEnv(machineAws),
  );
  assert.equal(made.code, 0, made.stderr);
  const token = await publish("default/m3", MANIFEST);
  await replaceBehindTheService("default/m3", token, await readFile(encrypted));
  const result = await fetchAs("default/m3", token);
  await expectFailed("default/m3", result, EXIT_CODES.FORBIDDEN, "FORBIDDEN");
  assert.match(result.r.stderr, /bound to machine "default\/m2"/);
});

test("tampered document in the store: DECRYPTION_FAILED, nothing written", async () => {
  const token = await publish("default/tampered", MANIFEST);
  const key = "main/configs/default/tampered";
  const stored = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  const doc = JSON.parse(await stored.Body!.transformToString());
  doc.data = doc.data.replace(
    /data:([A-Za-z0-9+/])/,
    (_m: string, c: string) => `data:${c === "A" ? "B" : "A"}`,
  );
  await replaceBehindTheService("default/tampered", token, JSON.stringify(doc));
  await expectFailed(
    "default/tampered",
    await fetchAs("default/tampered", token),
    EXIT_CODES.DECRYPTION_FAILED,
    "DECRYPTION_FAILED",
  );
});

test("expired token: TOKEN_EXPIRED, not retried, nothing written", async () => {
  const token = await publish("default/late", MANIFEST, shortService);
  await new Promise((r) => setTimeout(r, 2500));
  const result = await fetchAs("default/late", token, [], machineAws, undefined, shortService);
  // The status route takes the same expired token, so the failure stays local (logged).
  await expectFailed("default/late", result, EXIT_CODES.TOKEN_EXPIRED, "TOKEN_EXPIRED", { reported: false });
  assert.match(result.r.stderr, /attempt 1 GET .*TOKEN_EXPIRED.*\(not retried\)/);
  assert.doesNotMatch(result.r.stderr, /attempt 2/);
});

test("another machine's token: FORBIDDEN, nothing written", async () => {
  await publish("default/victim", MANIFEST);
  const otherToken = await publish("default/intruder", MANIFEST);
  const result = await fetchAs("default/victim", otherToken);
  await expectFailed("default/victim", result, EXIT_CODES.FORBIDDEN, "FORBIDDEN", { reported: false });
  const h = await history("default/victim");
  assert.equal(h.at(-1)!.phase, "published", "the intruder cannot write the victim's status");
});

test("the store down for the first attempts, then up: 503 + Retry-After, retried, succeeded", async () => {
  const token = await publish("default/flaky", MANIFEST);
  proxy.setDown(true);
  const root = await newRoot();
  // The store comes back only once the fetcher has seen the 503 and scheduled a retry: a fixed
  // wait raced the first attempt on a loaded machine.
  const r = await run(
    fetchArgs(service, "default/flaky", token, root, "--deadline", "60s"),
    machineEnv(machineAws),
    undefined,
    60_000,
    { pattern: /attempt \d+ GET .*retrying in/, onMatch: () => proxy.setDown(false) },
  );
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /attempt 1 GET .*HTTP 503.*retrying in/);
  assert.match(r.stderr, /attempt \d+ GET .*: ok in/);
  await checkHappy(root);
  const h = await history("default/flaky");
  assert.equal(h.at(-1)!.phase, "succeeded");
});

test("s3:// straight from the store, down then up, with the machine's own credentials", async () => {
  await publish("default/direct", MANIFEST);
  proxy.setDown(true);
  const root = await newRoot();
  const r = await run(
    [
      "fetch",
      "--from",
      `s3://${bucket}/main/configs/default/direct`,
      "--apply",
      "--root",
      root,
      "--deadline",
      "60s",
    ],
    machineEnv({
      ...machineAws,
      AWS_ACCESS_KEY_ID: peer("S3_SEAWEEDFS_ACCESS_KEY"),
      AWS_SECRET_ACCESS_KEY: peer("S3_SEAWEEDFS_SECRET_KEY"),
      AWS_ENDPOINT_URL_S3: proxy.url,
    }),
    undefined,
    60_000,
    { pattern: /attempt \d+ get s3:.*retrying in/, onMatch: () => proxy.setDown(false) },
  );
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /attempt 1 get s3:\/\/.*STORE_UNAVAILABLE.*retrying in/);
  await checkHappy(root);
});

test("the service down past the deadline: SERVICE_UNAVAILABLE with a clear message", async () => {
  const port = await freePort();
  const root = await newRoot();
  const token = join(dir.path, "some-token");
  await writeFile(token, "t0ken", { mode: 0o600 });
  const t0 = Date.now();
  const r = await run(
    [
      "fetch",
      "--from",
      `http://127.0.0.1:${port}/v1/machines/default/m1/config`,
      "--token-file",
      token,
      "--apply",
      "--root",
      root,
      "--deadline",
      "3s",
      "--report-timeout",
      "2s",
    ],
    machineEnv(machineAws),
  );
  assert.equal(r.code, EXIT_CODES.SERVICE_UNAVAILABLE, r.stderr);
  assert.ok(Date.now() - t0 < 15_000);
  assert.match(
    r.stderr,
    /bootseal: GET http:\/\/127\.0\.0\.1:\d+\/v1\/machines\/default\/m1\/config: gave up after \d+ attempts in [\d.]+s \(the deadline reached\); last error: .*ECONNREFUSED/,
  );
  assert.match(r.stderr, /phase failed SERVICE_UNAVAILABLE/);
  assert.deepEqual(await listAll(root), []);
});

test("--exec exiting 1: failed with the exit code and the output tail; no marker, no sentinel", async () => {
  const token = await publish("default/badjoin", MANIFEST);
  const { r, root } = await fetchAs("default/badjoin", token, [
    "--exec",
    "echo '[preflight] port 10250 in use' >&2; exit 1",
  ]);
  assert.equal(r.code, EXIT_CODES.EXEC_FAILED, r.stderr);
  const h = await history("default/badjoin");
  assert.deepEqual(
    h.map((e) => e.phase),
    ["published", "fetching", "decrypted", "written", "running", "failed"],
  );
  assert.equal(h.at(-1)!.exitCode, 1);
  assert.equal(h.at(-1)!.output, "[preflight] port 10250 in use\n");
  assert.match(String(h.at(-1)!.message), /^EXEC_FAILED: the bootstrap command exited with code 1/);
  const files = await listAll(root);
  assert.ok(files.includes("/var/lib/kubelet/token"), "the files were written before the command ran");
  assert.ok(!files.includes("/var/lib/bootseal/bootstrap.done"));
  assert.ok(!files.includes("/run/cluster-api/bootstrap-success.complete"));
});

test("a manifest path escaping the allowed roots: PATH_NOT_ALLOWED, nothing written", async () => {
  const token = await publish(
    "default/escape",
    `${MANIFEST}---\npath: /etc/../root/.ssh/authorized_keys\ncontent: x\n`,
  );
  await expectFailed(
    "default/escape",
    await fetchAs("default/escape", token),
    EXIT_CODES.PATH_NOT_ALLOWED,
    "PATH_NOT_ALLOWED",
  );
  const token2 = await publish(
    "default/escape2",
    `${MANIFEST}---\npath: /usr/local/bin/kubelet\ncontent: x\n`,
  );
  await expectFailed(
    "default/escape2",
    await fetchAs("default/escape2", token2),
    EXIT_CODES.PATH_NOT_ALLOWED,
    "PATH_NOT_ALLOWED",
  );
});

test("one-time mode: the machine deletes its config after succeeded", async () => {
  // The service runs with the default oneTimeFetch, after-success: it deleted the config on
  // `succeeded`, and the machine's DELETE is answered 204 all the same.
  const token = await publish("default/once", MANIFEST);
  const { r } = await fetchAs("default/once", token, ["--one-time"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /one-time: config deleted/);
});

test("the single executable (this tree's build in sea/) fetches from the service too", async () => {
  const { linuxX64 } = await builtSea();
  const token = await publish("default/sea", MANIFEST);
  const { r, root } = await fetchAs("default/sea", token, [], machineAws, linuxX64);
  assert.equal(r.code, 0, r.stderr);
  await checkHappy(root);
  assert.equal((await history("default/sea")).at(-1)!.phase, "succeeded");
});
