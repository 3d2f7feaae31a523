/**
 * bench/autocannon-storm: issue #33's second load generator, written apart from bench/lib/ and
 * the tests (it imports neither), so that a result cannot come from our own client. autocannon
 * drives the same request mix as bench/boot-storm.ts against a `bootseal serve` started the way
 * `npm start` starts it (the Node flags of package.json's start script, dist/cli/main.js):
 *
 *   publish  PUT /v1/machines/storm/mN/config, a 16 KiB cloud-config, the controller's token;
 *            each answer's bootstrapToken kept for the machine;
 *   storm    per machine, on one keep-alive connection and in order: GET …/config with the
 *            machine's own token, then five POST …/status (fetching, decrypted, written,
 *            running, succeeded).
 *
 * --connections machines are in flight (autocannon's connections; each takes the next machine
 * when its last one is done, and gets machines ÷ connections of them). Every answer's status
 * is checked per request kind (publish 201, fetch 200, status 200 or 202); anything else, and
 * autocannon's socket errors and timeouts, are errors, counted and printed; the exit status is
 * 1 when there was any.
 *
 *   npm run build && . .peers/env && node_modules/.bin/node bench/autocannon-storm.ts
 *       [--machines 2000] [--connections 200] [--payload-kib 16] [--stores file,s3]
 *
 * s3 is the SeaweedFS peer (BOOTSEAL_TEST_S3_SEAWEEDFS_*), a fresh bucket removed at the end.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { argv, env, exit } from "node:process";
import { parseArgs } from "node:util";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListObjectsV2Command,
  S3Client,
} from "@aws-sdk/client-s3";
import { generateX25519Identity, identityToRecipient } from "age-encryption";

/** What this script uses of autocannon 9 (it ships no types). */
interface Request {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}
interface Step<C> extends Request {
  setupRequest: (req: Request, ctx: C) => Request;
  onResponse: (status: number, body: string, ctx: C) => void;
}
interface Run<C> {
  url: string;
  connections: number;
  amount: number;
  timeout: number;
  requests: Step<C>[];
}
interface Result {
  readonly errors: number;
  readonly timeouts: number;
  readonly latency: { readonly p99: number }; // ms
}
const autocannon = createRequire(import.meta.url)("autocannon") as <C>(o: Run<C>) => Promise<Result>;

const { values: opts } = parseArgs({
  args: argv.slice(2),
  options: {
    machines: { type: "string", default: "2000" },
    connections: { type: "string", default: "200" },
    "payload-kib": { type: "string", default: "16" },
    stores: { type: "string", default: "file,s3" },
  },
  strict: true,
});
const CONNECTIONS = Number(opts.connections);
const REQUESTED = Number(opts.machines);
if (!Number.isInteger(REQUESTED) || !Number.isInteger(CONNECTIONS) || REQUESTED < 1 || CONNECTIONS < 1)
  throw new Error("--machines and --connections: positive integers");
// autocannon gives each connection an equal share of `amount`: whole machines per connection.
const PER_CONNECTION = Math.ceil(REQUESTED / CONNECTIONS);
const MACHINES = PER_CONNECTION * CONNECTIONS;
const PAYLOAD_BYTES = Number(opts["payload-kib"]) * 1024;
const STORES = opts.stores.split(",").filter(Boolean);
for (const s of STORES) if (s !== "file" && s !== "s3") throw new Error(`--stores: file or s3, not ${s}`);
const REPO = new URL("../", import.meta.url).pathname;
const PHASES = ["fetching", "decrypted", "written", "running", "succeeded"] as const;

/** The Node flags of `npm start` (package.json: `node FLAGS dist/cli/main.js serve`). */
function npmStartFlags(): string[] {
  const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { scripts: { start: string } };
  const words = pkg.scripts.start.trim().split(/\s+/);
  const at = words.indexOf("dist/cli/main.js");
  if (words[0] !== "node" || at < 0) throw new Error(`unexpected start script: ${pkg.scripts.start}`);
  return words.slice(1, at);
}

/** A cloud-config of exactly PAYLOAD_BYTES naming the machine. */
const filler = randomBytes(PAYLOAD_BYTES).toString("base64");
function payloadOf(name: string): Buffer {
  const head = `#cloud-config\n# ${name}\nwrite_files:\n  - path: /etc/storm\n    content: `;
  return Buffer.from(`${head}${filler.slice(0, PAYLOAD_BYTES - head.length - 1)}\n`);
}

interface Server {
  readonly url: string;
  readonly child: ChildProcess;
  readonly log: string;
}

async function startServer(dir: string, store: Record<string, unknown>, extraEnv: NodeJS.ProcessEnv) {
  const controller = randomBytes(32).toString("base64url");
  const recipient = await identityToRecipient(await generateX25519Identity());
  const config = {
    creation_rules: [{ age: recipient }],
    controllers: [
      {
        name: "cannon",
        tokenSha256: createHash("sha256").update(controller).digest("hex"),
        scopes: ["admin"],
      },
    ],
    bootstrapToken: { ttl: "1h", uses: 10 },
    limits: { maxConnectionsPerAddress: 0 },
    audit: { path: join(dir, "audit.log") },
    ...store,
  };
  const file = join(dir, "config.yaml");
  writeFileSync(file, JSON.stringify(config)); // JSON is YAML
  const log = join(dir, "serve.log");
  const fd = openSync(log, "a");
  const child = spawn(
    process.execPath,
    [
      ...npmStartFlags(),
      join(REPO, "dist/cli/main.js"),
      "serve",
      "--config",
      file,
      "--listen",
      "127.0.0.1:0",
    ],
    { stdio: ["ignore", fd, fd], cwd: dir, env: { PATH: env.PATH, HOME: dir, ...extraEnv } },
  );
  closeSync(fd);
  for (let waited = 0; waited < 30_000; waited += 100) {
    const out = readFileSync(log, "utf8");
    const url = /listening on (http\S+)/.exec(out)?.[1];
    if (url && out.includes("controllers:")) return { server: { url, child, log } as Server, controller };
    if (child.exitCode !== null) throw new Error(`serve exited: ${out.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGKILL");
  throw new Error("serve did not start in 30 s");
}

async function stopServer(s: Server): Promise<void> {
  if (s.child.exitCode !== null) return;
  const exited = new Promise((r) => s.child.once("exit", r));
  s.child.kill("SIGTERM");
  const timer = setTimeout(() => s.child.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
}

/** user + system CPU of a process, ms (/proc/<pid>/stat, clock ticks of 10 ms). */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

type Kind = "publish" | "fetch" | "status";
interface Tally {
  readonly latencies: Record<Kind, number[]>;
  readonly errors: string[];
}

const p = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] as number) : Number.NaN;
};

function fail(t: Tally, what: string): void {
  t.errors.push(what);
}

async function runStore(store: string): Promise<Record<string, string | number>> {
  const dir = mkdtempSync(join(tmpdir(), `bootseal-cannon-${store}-`));
  let bucket: string | undefined;
  let s3: S3Client | undefined;
  let server: Server | undefined;
  try {
    let storeConfig: Record<string, unknown> = { store: `file://${join(dir, "store")}` };
    let extraEnv: NodeJS.ProcessEnv = {};
    if (store === "s3") {
      const endpoint = env.BOOTSEAL_TEST_S3_SEAWEEDFS_ENDPOINT;
      const accessKeyId = env.BOOTSEAL_TEST_S3_SEAWEEDFS_ACCESS_KEY;
      const secretAccessKey = env.BOOTSEAL_TEST_S3_SEAWEEDFS_SECRET_KEY;
      if (!endpoint || !accessKeyId || !secretAccessKey)
        throw new Error("s3: no SeaweedFS peer (source .peers/env)");
      s3 = new S3Client({
        endpoint,
        region: "us-east-1",
        forcePathStyle: true,
        credentials: { accessKeyId, secretAccessKey },
      });
      bucket = `cannon-${randomBytes(6).toString("hex")}`;
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      storeConfig = {
        store: `s3://${bucket}/storm`,
        s3: { endpoint, region: "us-east-1", forcePathStyle: true },
      };
      extraEnv = { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey };
    }
    const started = await startServer(dir, storeConfig, extraEnv);
    server = started.server;
    const pid = server.child.pid;
    const t: Tally = { latencies: { publish: [], fetch: [], status: [] }, errors: [] };
    const tokens: (string | undefined)[] = new Array(MACHINES);
    const path = (i: number, what: string) => `/v1/machines/storm/m${i}/${what}`;
    interface Ctx {
      machine?: number;
      sentAt?: number;
    }

    // Publish: each request the next machine.
    let nextPublish = 0;
    const cpu0 = cpuMs(pid);
    // Wall time of our own, to the last answer: autocannon ends a run on its next 1 s tick.
    let lastAnswer = 0;
    const pubStart = performance.now();
    const pub = await autocannon<Ctx>({
      url: server.url,
      connections: CONNECTIONS,
      amount: MACHINES,
      timeout: 60,
      requests: [
        {
          method: "PUT",
          setupRequest: (req: Request, ctx: Ctx) => {
            const i = nextPublish++;
            ctx.machine = i;
            ctx.sentAt = performance.now();
            return {
              ...req,
              path: path(i, "config"),
              headers: {
                authorization: `Bearer ${started.controller}`,
                "content-type": "application/octet-stream",
              },
              body: payloadOf(`m${i}`),
            };
          },
          onResponse: (status: number, body: string, ctx: Ctx) => {
            lastAnswer = performance.now();
            t.latencies.publish.push(lastAnswer - (ctx.sentAt ?? 0));
            const i = ctx.machine ?? -1;
            if (status !== 201) return fail(t, `publish m${i}: ${status} ${body.slice(0, 200)}`);
            const token = (JSON.parse(body) as { bootstrapToken?: unknown }).bootstrapToken;
            if (typeof token !== "string") return fail(t, `publish m${i}: no bootstrapToken`);
            tokens[i] = token;
          },
        },
      ],
    });
    const pubSeconds = (lastAnswer - pubStart) / 1000;
    const cpu1 = cpuMs(pid);

    // The storm: per machine one fetch and five reports in order, on one connection.
    let nextBoot = 0;
    const auth = (ctx: Ctx) => `Bearer ${tokens[ctx.machine ?? -1] ?? "none"}`;
    const statusStep = (phase: string): Step<Ctx> => ({
      method: "POST",
      setupRequest: (req: Request, ctx: Ctx) => {
        ctx.sentAt = performance.now();
        return {
          ...req,
          path: path(ctx.machine ?? -1, "status"),
          headers: { authorization: auth(ctx), "content-type": "application/json" },
          body: JSON.stringify({ phase, message: "autocannon storm" }),
        };
      },
      onResponse: (status: number, body: string, ctx: Ctx) => {
        lastAnswer = performance.now();
        t.latencies.status.push(lastAnswer - (ctx.sentAt ?? 0));
        if (status !== 200 && status !== 202)
          fail(t, `status ${phase} m${ctx.machine}: ${status} ${body.slice(0, 200)}`);
      },
    });
    const cpu2 = cpuMs(pid);
    const stormStart = performance.now();
    const storm = await autocannon<Ctx>({
      url: server.url,
      connections: CONNECTIONS,
      amount: MACHINES * (1 + PHASES.length),
      timeout: 60,
      requests: [
        {
          method: "GET",
          setupRequest: (req: Request, ctx: Ctx) => {
            // autocannon may build one request past a connection's last: a machine that does
            // not exist, never sent (if it were, its 401 would count as an error).
            ctx.machine = nextBoot++;
            ctx.sentAt = performance.now();
            return { ...req, path: path(ctx.machine, "config"), headers: { authorization: auth(ctx) } };
          },
          onResponse: (status: number, body: string, ctx: Ctx) => {
            lastAnswer = performance.now();
            t.latencies.fetch.push(lastAnswer - (ctx.sentAt ?? 0));
            if (status !== 200) fail(t, `fetch m${ctx.machine}: ${status} ${body.slice(0, 200)}`);
            else if (!body.includes('"sops"') || !body.includes("ENC[AES256_GCM,"))
              fail(t, `fetch m${ctx.machine}: not a SOPS document`);
          },
        },
        ...PHASES.map(statusStep),
      ],
    });
    const stormSeconds = (lastAnswer - stormStart) / 1000;
    const cpu3 = cpuMs(pid);
    for (const [name, r] of [
      ["publish", pub],
      ["storm", storm],
    ] as const) {
      if (r.errors || r.timeouts)
        fail(t, `${name}: autocannon ${r.errors} socket errors, ${r.timeouts} timeouts`);
    }
    const row = {
      store,
      machines: MACHINES,
      "storm machines/s": Math.round(MACHINES / stormSeconds),
      "storm req/s": Math.round((MACHINES * (1 + PHASES.length)) / stormSeconds),
      "publish/s": Math.round(MACHINES / pubSeconds),
      "publish p99 ms": Math.round(p(t.latencies.publish, 0.99)),
      "fetch p99 ms": Math.round(p(t.latencies.fetch, 0.99)),
      "status p99 ms": Math.round(p(t.latencies.status, 0.99)),
      "autocannon storm p99 ms": storm.latency.p99,
      "server CPU ms/machine (publish + storm)": `${((cpu1 - cpu0) / MACHINES).toFixed(1)} + ${((cpu3 - cpu2) / MACHINES).toFixed(1)}`,
      errors: t.errors.length,
    };
    console.log(
      `\n== bootseal, ${store} store (${server.url}): ${MACHINES} machines, ${CONNECTIONS} connections`,
    );
    console.log(
      `  publish ${pubSeconds.toFixed(1)} s, storm ${stormSeconds.toFixed(1)} s; answers counted: publish ${t.latencies.publish.length}, fetch ${t.latencies.fetch.length}, status ${t.latencies.status.length}`,
    );
    for (const [k, v] of Object.entries(row)) console.log(`  ${k}: ${v}`);
    for (const e of t.errors.slice(0, 20)) console.log(`  ERROR ${e}`);
    return row;
  } finally {
    if (server) await stopServer(server);
    rmSync(dir, { recursive: true, force: true });
    if (s3 && bucket) {
      for (;;) {
        const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
        const keys = (page.Contents ?? []).map((c) => ({ Key: c.Key }));
        if (keys.length === 0) break;
        await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }));
      }
      await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
      s3.destroy();
    }
  }
}

console.log(
  `bench/autocannon-storm: ${MACHINES} machines${MACHINES !== REQUESTED ? ` (${REQUESTED} rounded up to whole machines per connection)` : ""}, ${CONNECTIONS} connections, ${PAYLOAD_BYTES / 1024} KiB payload, node ${npmStartFlags().join(" ")} dist/cli/main.js serve; autocannon ${JSON.parse(readFileSync(join(REPO, "node_modules/autocannon/package.json"), "utf8")).version}`,
);
const rows: Record<string, string | number>[] = [];
for (const store of STORES) rows.push(await runStore(store));
const heads = Object.keys(rows[0] ?? {});
console.log(`\n| ${heads.join(" | ")} |\n|${heads.map(() => " --- |").join("")}`);
for (const r of rows) console.log(`| ${heads.map((h) => r[h]).join(" | ")} |`);
if (rows.some((r) => r.errors !== 0)) exit(1);
