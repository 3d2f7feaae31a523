/**
 * bench/providers: throughput and latency of every master key and every object store against
 * its peer, through the provider code the product uses (providers/keys, providers/stores).
 *
 *   - master keys: wrap/s and unwrap/s of a 32-byte data key. age (generated X25519 identity),
 *     PGP (a generated Curve25519 key in a key file, BOOTSEAL_PGP_KEY_FILE, OpenPGP.js only),
 *     AWS KMS on moto and on local-kms (the context {"bootseal-machine": "bench/m0"}, as the
 *     service binds it), Vault transit on OpenBao, and, when .peers/env names them, GCP KMS and
 *     Azure Key Vault on the wire-protocol FAKES (test/fakes). Unwrap opens the encs the wrap
 *     case made, round robin, and checks the bytes.
 *   - object stores: put/s (create-only, If-None-Match: *, 4 KiB, a new key each) and get/s
 *     (round robin over the keys the put case wrote, length checked): memory, file:// in a
 *     temporary directory, s3:// on SeaweedFS and on moto, gs:// on fake-gcs-server.
 *
 * Each case runs for a fixed time (--duration, default 3 s) with a fixed number of operations
 * in flight (--concurrency, default 8), after a short warm-up (SDK load, connections). Rates are
 * operations completed / wall time of the case; latencies are per operation; "cpu ms" is this
 * process's CPU per operation (the client side: SDK, signing, HTTP; for age and PGP all of it). Failed operations
 * are counted and the first one is printed; a case stops early after 100 failures.
 *
 *   . .peers/env && npx node bench/providers.ts [--duration S] [--concurrency N] [--only age,s3-moto,…]
 *
 * Bounded: every operation carries an AbortSignal that fires 15 s after its case should have
 * ended, and a watchdog ends the process after --watchdog seconds (default 240) whatever
 * happens. Keys, buckets and directories it made are removed at the end (AWS KMS keys are
 * scheduled for deletion after 7 days, the minimum; the fakes keep keys in memory only).
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { argv, cpuUsage, env, exit, version as nodeVersion } from "node:process";
import { parseArgs } from "node:util";
import { CreateKeyCommand, KMSClient, ScheduleKeyDeletionCommand } from "@aws-sdk/client-kms";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import type { TokenCredential } from "@azure/identity";
import { KeyClient } from "@azure/keyvault-keys";
import { KeyManagementServiceClient } from "@google-cloud/kms";
import { Storage } from "@google-cloud/storage";
import { credentials as grpcCredentials } from "@grpc/grpc-js";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import * as openpgp from "openpgp";
import type { KeyKind, ProviderDeps } from "../providers/keys/index.ts";
import { keyTypeOf } from "../providers/keys/index.ts";
import { openStore } from "../providers/stores/index.ts";
import { createMemoryStore } from "../providers/stores/memory.ts";
import type { ObjectStore } from "../providers/stores/object-store.ts";
import type { KeyEntry, MasterKey } from "../src/envelope/sops/master-key.ts";
import { optionalPeer, type PeerName, peer, uniqueName } from "../test/helpers/peers.ts";
import { moto, rawS3, removeS3Bucket, type S3Peer, seaweedfs } from "../test/helpers/s3.ts";

const { values: args } = parseArgs({
  args: argv.slice(2),
  options: {
    duration: { type: "string", default: "3" },
    concurrency: { type: "string", default: "8" },
    only: { type: "string" },
    watchdog: { type: "string", default: "240" },
  },
});
const DURATION_MS = Number(args.duration) * 1000;
const CONCURRENCY = Number(args.concurrency);
const WATCHDOG_S = Number(args.watchdog);
if (!(DURATION_MS > 0) || !Number.isInteger(CONCURRENCY) || CONCURRENCY < 1 || !(WATCHDOG_S > 0)) {
  console.error("usage: bench/providers.ts [--duration S] [--concurrency N] [--only ids] [--watchdog S]");
  exit(2);
}
const ONLY = args.only ? new Set(args.only.split(",").map((s) => s.trim())) : null;
const GRACE_MS = 15_000;
const MAX_ERRORS = 100;
const BODY_BYTES = 4096;
const ENC_POOL = 512;
const AWS_TEST_CREDENTIALS = { accessKeyId: "testing", secretAccessKey: "testing" };

// No GCE metadata probe from google-auth-library (the GCP admin client): nothing here runs on GCE.
env.METADATA_SERVER_DETECTION ??= "none";

const watchdog = setTimeout(() => {
  console.error(`bench/providers: watchdog: still running after ${WATCHDOG_S} s, exiting (cleanup skipped)`);
  exit(1);
}, WATCHDOG_S * 1000);
watchdog.unref();

// ---------------------------------------------------------------------------------------------
// Measuring

interface Result {
  readonly ops: number;
  readonly errors: number;
  readonly firstError: string | undefined;
  readonly seconds: number;
  /** Latencies of the successful operations, ms, sorted. */
  readonly latencies: number[];
  /** This process's CPU (user + system) per successful operation, ms: the client's cost. */
  readonly cpuMsPerOp: number;
}

type Op = (n: number, signal: AbortSignal) => Promise<void>;

function describeError(err: unknown): string {
  const e = err as { code?: string; name?: string; message?: string };
  return `${e?.code ?? e?.name ?? "Error"}: ${String(e?.message ?? err).slice(0, 200)}`;
}

/** `op` with CONCURRENCY operations in flight until DURATION_MS has passed; n counts up from `first`. */
async function measure(op: Op, first = 0): Promise<Result> {
  const signal = AbortSignal.timeout(DURATION_MS + GRACE_MS);
  const latencies: number[] = [];
  let next = first;
  let errors = 0;
  let firstError: string | undefined;
  const start = performance.now();
  const cpu0 = cpuUsage();
  const end = start + DURATION_MS;
  const worker = async () => {
    while (performance.now() < end && errors < MAX_ERRORS) {
      const n = next++;
      const t0 = performance.now();
      try {
        await op(n, signal);
        latencies.push(performance.now() - t0);
      } catch (err) {
        errors++;
        firstError ??= describeError(err);
        if (signal.aborted) break;
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const seconds = (performance.now() - start) / 1000;
  const cpu = cpuUsage(cpu0);
  latencies.sort((a, b) => a - b);
  const cpuMsPerOp = (cpu.user + cpu.system) / 1000 / Math.max(1, latencies.length);
  return { ops: latencies.length, errors, firstError, seconds, latencies, cpuMsPerOp };
}

/** One operation, then CONCURRENCY at once: loads SDKs, opens connections, fills caches. */
async function warmUp(op: Op, first: number): Promise<number> {
  const signal = AbortSignal.timeout(GRACE_MS * 2);
  await op(first, signal);
  await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => op(first + 1 + i, signal)));
  return first + 1 + CONCURRENCY;
}

function quantile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] as number;
}

function fmtRate(r: Result): string {
  const rate = r.ops / r.seconds;
  return rate >= 100 ? rate.toFixed(0) : rate.toFixed(1);
}

function fmtMs(ms: number): string {
  if (Number.isNaN(ms)) return "-";
  return ms >= 100 ? ms.toFixed(0) : ms >= 1 ? ms.toFixed(1) : ms.toFixed(2);
}

const COLS = { name: 30, peer: 44, num: 8 };

function header(first: string, a: string, b: string): string {
  const n = (s: string) => s.padStart(COLS.num);
  return `${first.padEnd(COLS.name)} ${"peer".padEnd(COLS.peer)} ${n(`${a}/s`)} ${n("p50 ms")} ${n("p99 ms")} ${n("cpu ms")} | ${n(`${b}/s`)} ${n("p50 ms")} ${n("p99 ms")} ${n("cpu ms")}  errors`;
}

function row(name: string, peer: string, a: Result, b: Result | null): string {
  const n = (s: string) => s.padStart(COLS.num);
  const half = (r: Result) =>
    `${n(fmtRate(r))} ${n(fmtMs(quantile(r.latencies, 0.5)))} ${n(fmtMs(quantile(r.latencies, 0.99)))} ${n(r.cpuMsPerOp.toFixed(3))}`;
  const second = b ? half(b) : `${n("-")} ${n("-")} ${n("-")} ${n("-")}`;
  return `${name.padEnd(COLS.name)} ${peer.padEnd(COLS.peer)} ${half(a)} | ${second}  ${a.errors}/${b?.errors ?? 0}`;
}

const notes: string[] = [];

function noteErrors(id: string, what: string, r: Result | null): void {
  if (r && r.errors > 0) notes.push(`${id} ${what}: ${r.errors} failed, first: ${r.firstError}`);
}

// ---------------------------------------------------------------------------------------------
// Master keys

interface Prepared<T> {
  readonly subject: T;
  readonly cleanup: () => Promise<void>;
}

interface Case<T> {
  /** Short id for --only. */
  readonly id: string;
  readonly name: string;
  readonly peer: string;
  /** null: runnable; a string: why this case is not measured here. */
  readonly missing: () => string | null;
  readonly prepare: () => Promise<Prepared<T>>;
}

function keyFrom(kind: KeyKind, fields: [string, string | Record<string, string>][], deps: ProviderDeps) {
  const type = keyTypeOf(kind);
  if (!type) throw new Error(`no provider for ${kind}`);
  const entry: KeyEntry = { kind, enc: "", fields: new Map(fields) };
  return type.fromMetadata(entry, deps);
}

function needs(...names: PeerName[]): () => string | null {
  return () => {
    const absent = names.filter((n) => optionalPeer(n) === undefined);
    return absent.length === 0 ? null : `not set: ${absent.map((n) => `BOOTSEAL_TEST_${n}`).join(", ")}`;
  };
}

async function tempDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

function awsKmsCase(id: string, variable: PeerName, peerName: string): Case<MasterKey> {
  return {
    id,
    name: "AWS KMS (context)",
    peer: peerName,
    missing: needs(variable),
    prepare: async () => {
      const endpoint = peer(variable);
      const admin = new KMSClient({ endpoint, region: "us-east-1", credentials: AWS_TEST_CREDENTIALS });
      const meta = (await admin.send(new CreateKeyCommand({ Description: "bootseal bench/providers" })))
        .KeyMetadata;
      const arn = meta?.Arn;
      if (!arn || !meta?.KeyId) throw new Error("CreateKey gave no ARN");
      const keyId = meta.KeyId;
      const deps = { env: {}, awsKms: { endpoint, credentials: AWS_TEST_CREDENTIALS } };
      const key = keyFrom(
        "kms",
        [
          ["arn", arn],
          ["context", { "bootseal-machine": "bench/m0" }],
          ["aws_profile", ""],
        ],
        deps,
      );
      return {
        subject: key,
        // By key id: moto answers HTTP 500 to key-state changes addressed by ARN.
        cleanup: async () => {
          try {
            await admin.send(new ScheduleKeyDeletionCommand({ KeyId: keyId, PendingWindowInDays: 7 }));
          } finally {
            admin.destroy();
          }
        },
      };
    },
  };
}

/** The Azure Key Vault fake accepts any bearer token. */
const STATIC_TOKEN: TokenCredential = {
  getToken: async () => ({ token: "bench-any-token", expiresOnTimestamp: Date.now() + 3_600_000 }),
};

const keyCases: Case<MasterKey>[] = [
  {
    id: "age",
    name: "age (X25519)",
    peer: "local (age-encryption)",
    missing: () => null,
    prepare: async () => {
      const identity = await generateX25519Identity();
      const deps = { env: { SOPS_AGE_KEY: identity } };
      return {
        subject: keyFrom("age", [["recipient", await identityToRecipient(identity)]], deps),
        cleanup: async () => {},
      };
    },
  },
  {
    id: "pgp",
    name: "PGP (Curve25519, key file)",
    peer: "local (OpenPGP.js, no gpg)",
    missing: () => null,
    prepare: async () => {
      const dir = await tempDir("bootseal-bench-pgp-");
      const { privateKey, publicKey } = await openpgp.generateKey({
        type: "ecc",
        curve: "curve25519Legacy",
        userIDs: [{ name: "bootseal bench" }],
        format: "armored",
      });
      const file = join(dir, "key.asc");
      await writeFile(file, privateKey, { mode: 0o600 });
      const fp = (await openpgp.readKey({ armoredKey: publicKey })).getFingerprint().toUpperCase();
      const deps = { env: { BOOTSEAL_PGP_KEY_FILE: file }, pgp: { gpg: false } };
      return {
        subject: keyFrom(
          "pgp",
          [
            ["fp", fp],
            ["created_at", "2026-01-01T00:00:00Z"],
          ],
          deps,
        ),
        cleanup: () => rm(dir, { recursive: true, force: true }),
      };
    },
  },
  awsKmsCase("kms-moto", "KMS_MOTO_ENDPOINT", "moto (emulator)"),
  awsKmsCase("kms-local", "KMS_LOCAL_ENDPOINT", "local-kms (emulator)"),
  {
    id: "gcp-kms",
    name: "GCP KMS",
    peer: "FAKE: test/fakes/gcp-kms-fake.ts (gRPC)",
    missing: needs("GCP_KMS_ENDPOINT"),
    prepare: async () => {
      const endpoint = peer("GCP_KMS_ENDPOINT").replace(/^[a-z]+:\/\//, "");
      const at = endpoint.lastIndexOf(":");
      const admin = new KeyManagementServiceClient({
        apiEndpoint: endpoint.slice(0, at),
        port: Number(endpoint.slice(at + 1)),
        sslCreds: grpcCredentials.createInsecure(),
        fallback: false,
      });
      const parent = "projects/bootseal-bench/locations/global";
      const ring = uniqueName("bench");
      try {
        await admin.createKeyRing({ parent, keyRingId: ring, keyRing: {} });
        const [created] = await admin.createCryptoKey({
          parent: `${parent}/keyRings/${ring}`,
          cryptoKeyId: "providers",
          cryptoKey: { purpose: "ENCRYPT_DECRYPT" },
        });
        const deps = { env: {}, gcpKms: { endpoint, insecure: true } };
        return {
          subject: keyFrom(
            "gcp_kms",
            [
              ["resource_id", created.name as string],
              ["created_at", "2026-01-01T00:00:00Z"],
            ],
            deps,
          ),
          // The fake has no deletion (nor has GCP for keys); its keys live in memory only.
          cleanup: async () => {},
        };
      } finally {
        await admin.close();
      }
    },
  },
  {
    id: "azure-kv",
    name: "Azure Key Vault (RSA-2048)",
    peer: "FAKE: test/fakes/azure-kv-fake.ts (HTTPS)",
    missing: needs("AZURE_KV_URL"),
    prepare: async () => {
      const vaultUrl = peer("AZURE_KV_URL").replace(/\/+$/, "");
      const admin = new KeyClient(vaultUrl, STATIC_TOKEN, { disableChallengeResourceVerification: true });
      const name = uniqueName("bench");
      const created = await admin.createRsaKey(name, { keySize: 2048 });
      const azureKv = { credential: STATIC_TOKEN, disableChallengeResourceVerification: true };
      return {
        subject: keyFrom(
          "azure_kv",
          [
            ["vault_url", vaultUrl],
            ["name", name],
            ["version", created.properties.version ?? ""],
            ["created_at", "2026-01-01T00:00:00Z"],
          ],
          { env: {}, azureKv },
        ),
        // The fake has no key deletion; its keys live in memory only.
        cleanup: async () => {},
      };
    },
  },
  {
    id: "vault",
    name: "Vault transit",
    peer: "OpenBao dev server (real)",
    missing: needs("VAULT_ADDR", "VAULT_TOKEN"),
    prepare: async () => {
      const addr = peer("VAULT_ADDR");
      const token = peer("VAULT_TOKEN");
      const name = uniqueName("bench");
      const call = async (method: string, path: string, body?: object) => {
        const res = await fetch(`${addr}/v1/transit/keys/${name}${path}`, {
          method,
          headers: { "X-Vault-Token": token, "Content-Type": "application/json" },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
        if (!res.ok) throw new Error(`${method} transit/keys/${name}${path}: HTTP ${res.status}`);
      };
      await call("POST", "");
      const deps = { env: { VAULT_TOKEN: token } };
      return {
        subject: keyFrom(
          "hc_vault",
          [
            ["vault_address", addr],
            ["engine_path", "transit"],
            ["key_name", name],
            ["created_at", "2026-01-01T00:00:00Z"],
          ],
          deps,
        ),
        cleanup: async () => {
          await call("POST", "/config", { deletion_allowed: true });
          await call("DELETE", "");
        },
      };
    },
  },
];

// ---------------------------------------------------------------------------------------------
// Object stores

function s3Case(id: string, peerName: string, vars: PeerName[], p: () => S3Peer): Case<ObjectStore> {
  return {
    id,
    name: "s3://",
    peer: peerName,
    missing: needs(...vars),
    prepare: async () => {
      const s3Peer = p();
      const Bucket = uniqueName("bench-providers");
      const s3 = rawS3(s3Peer);
      await s3.send(new CreateBucketCommand({ Bucket }));
      s3.destroy();
      return {
        subject: openStore(`s3://${Bucket}/bench`, {
          s3: { endpoint: s3Peer.endpoint, credentials: s3Peer.credentials },
          env: {},
        }),
        cleanup: async () => {
          await removeS3Bucket(s3Peer, Bucket);
        },
      };
    },
  };
}

const storeCases: Case<ObjectStore>[] = [
  {
    id: "memory",
    name: "memory",
    peer: "in process",
    missing: () => null,
    prepare: async () => ({ subject: createMemoryStore(), cleanup: async () => {} }),
  },
  {
    id: "file",
    name: "file://",
    peer: `temporary directory (${tmpdir()})`,
    missing: () => null,
    prepare: async () => {
      const dir = await tempDir("bootseal-bench-store-");
      return {
        subject: openStore(`file://${dir}/store`),
        cleanup: () => rm(dir, { recursive: true, force: true }),
      };
    },
  },
  s3Case(
    "s3-seaweedfs",
    "SeaweedFS weed mini (real)",
    ["S3_SEAWEEDFS_ENDPOINT", "S3_SEAWEEDFS_ACCESS_KEY", "S3_SEAWEEDFS_SECRET_KEY"],
    seaweedfs,
  ),
  s3Case("s3-moto", "moto (emulator)", ["S3_MOTO_ENDPOINT"], moto),
  {
    id: "gcs",
    name: "gs://",
    peer: "fake-gcs-server (emulator)",
    missing: needs("GCS_ENDPOINT"),
    prepare: async () => {
      const apiEndpoint = peer("GCS_ENDPOINT");
      const storage = new Storage({ apiEndpoint, projectId: "test" });
      const [bucket] = await storage.createBucket(uniqueName("bench-providers"));
      return {
        subject: openStore(`gs://${bucket.name}/bench`, { gcs: { apiEndpoint, projectId: "test" } }),
        cleanup: async () => {
          await bucket.deleteFiles({ force: true });
          await bucket.delete();
        },
      };
    },
  },
];

// ---------------------------------------------------------------------------------------------
// Running

async function runKey(k: MasterKey): Promise<[Result, Result]> {
  const secret = new Uint8Array(randomBytes(32));
  const encs: string[] = [];
  const wrap: Op = async (_n, signal) => {
    const enc = await k.wrap(secret, { signal });
    if (encs.length < ENC_POOL) encs.push(enc);
  };
  await warmUp(wrap, 0);
  const wrapped = await measure(wrap);
  if (encs.length === 0) throw new Error("no wrap succeeded: nothing to unwrap");
  const unwrap: Op = async (n, signal) => {
    const out = await k.unwrap(encs[n % encs.length] as string, { signal });
    if (out === null) throw new Error("unwrap found no credential");
    if (Buffer.compare(Buffer.from(out), Buffer.from(secret)) !== 0) throw new Error("unwrap: other bytes");
  };
  await warmUp(unwrap, 0);
  return [wrapped, await measure(unwrap)];
}

async function runStore(store: ObjectStore): Promise<[Result, Result]> {
  const body = new Uint8Array(randomBytes(BODY_BYTES));
  const written: string[] = [];
  const put: Op = async (n, signal) => {
    const key = `objects/${n}`;
    await store.put(key, body, { ifNoneMatch: "*" }, { signal, contentType: "application/octet-stream" });
    written.push(key);
  };
  const first = await warmUp(put, 0);
  const puts = await measure(put, first);
  if (written.length === 0) throw new Error("no put succeeded: nothing to get");
  const get: Op = async (n, signal) => {
    const got = await store.get(written[n % written.length] as string, { signal });
    if (got === null) throw new Error("get: object missing");
    if (got.body.length !== BODY_BYTES) throw new Error(`get: ${got.body.length} bytes`);
  };
  await warmUp(get, 0);
  return [puts, await measure(get)];
}

async function section<T>(
  title: string,
  cases: readonly Case<T>[],
  ops: [string, string],
  run: (subject: T) => Promise<[Result, Result]>,
): Promise<void> {
  console.log(`\n${title}`);
  console.log(header("", ops[0], ops[1]));
  for (const c of cases) {
    if (ONLY && !ONLY.has(c.id)) continue;
    const why = c.missing();
    if (why !== null) {
      console.log(`${c.name.padEnd(COLS.name)} ${c.peer.padEnd(COLS.peer)} not measured (${why})`);
      continue;
    }
    let prepared: Prepared<T> | undefined;
    try {
      prepared = await c.prepare();
      const [a, b] = await run(prepared.subject);
      console.log(row(c.name, c.peer, a, b));
      noteErrors(c.id, ops[0], a);
      noteErrors(c.id, ops[1], b);
    } catch (err) {
      console.log(`${c.name.padEnd(COLS.name)} ${c.peer.padEnd(COLS.peer)} FAILED: ${describeError(err)}`);
      process.exitCode = 1;
    } finally {
      if (prepared) {
        await prepared.cleanup().catch((err: unknown) => {
          notes.push(`${c.id}: cleanup failed: ${describeError(err)}`);
          process.exitCode = 1;
        });
      }
    }
  }
}

const started = performance.now();
console.log(
  `bench/providers: ${DURATION_MS / 1000} s per case, ${CONCURRENCY} in flight; Node ${nodeVersion}, ` +
    `${cpus().length} CPUs, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`,
);
console.log(
  '"FAKE" = a hand-written wire-protocol fake (test/fakes), not the vendor\'s service or emulator.',
);

await section("master keys: a 32-byte data key", keyCases, ["wrap", "unwrap"], runKey);
await section(
  `object stores: ${BODY_BYTES} B objects, create-only puts`,
  storeCases,
  ["put", "get"],
  runStore,
);

for (const note of notes) console.log(`note: ${note}`);
console.log(`\ntotal ${((performance.now() - started) / 1000).toFixed(1)} s`);
clearTimeout(watchdog);
// SDK clients may keep sockets or gRPC channels open a little longer: do not wait for them.
exit(process.exitCode ?? 0);
