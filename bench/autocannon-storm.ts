/**
 * bench/autocannon-storm: issue #33's second load generator, written apart from bench/lib/ and
 * the tests (it imports neither), so that a result cannot come from our own client. autocannon
 * drives the same request mix as bench/boot-storm.ts, one target after the other:
 *
 *   noop      this client's ceiling: a node:http server in its own process (written here, not
 *             bench/lib's) that reads each request and answers it with a small fixed body
 *             (201 to a PUT, with a bootstrapToken; 200 otherwise);
 *   file, s3  `bootseal serve` started the way `npm start` starts it (the Node flags of
 *             package.json's start script, dist/cli/main.js), on file:// in a temporary
 *             directory or on the SeaweedFS peer (BOOTSEAL_TEST_S3_SEAWEEDFS_*, a fresh bucket
 *             removed at the end); one age creation rule, an admin controller token, tokens
 *             of 1 h and 10 uses, no per-address connection cap, an audit log;
 *   openbao   OpenBao (BOOTSEAL_TEST_BAO_BIN) on raft storage on disk, KV v2, a publisher
 *             token with its own policy, a token role whose policy is templated on the
 *             machine's entity alias (its config readable, its status writable).
 *
 *   publish  per machine: bootseal PUT /v1/machines/storm/mN/config (a 16 KiB cloud-config);
 *            OpenBao the secret's write, then the machine's token (two requests, timed
 *            together);
 *   storm    per machine, on one keep-alive connection and in order: the config read with the
 *            machine's own token, then five status writes (fetching, decrypted, written,
 *            running, succeeded).
 *
 * --connections machines are in flight (autocannon's connections; each gets machines ÷
 * connections of them, one after the other). Every answer's status is checked (bootseal:
 * publish 201, fetch 200 and a SOPS document, status 200 or 202; OpenBao: 200/204 and the
 * secret written); anything else, and autocannon's socket errors and timeouts, are errors,
 * counted and printed; the exit status is 1 when there was any. Rates are machines over the
 * time to the last answer; the server's CPU is read from /proc.
 *
 *   npm run build && . .peers/env && node_modules/.bin/node bench/autocannon-storm.ts
 *       [--machines 2000] [--connections 200] [--payload-kib 16] [--targets noop,file,s3,openbao]
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
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
    targets: { type: "string", default: "noop,file,s3,openbao" },
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
const TARGETS = opts.targets.split(",").filter(Boolean);
for (const t of TARGETS)
  if (t !== "noop" && t !== "file" && t !== "s3" && t !== "openbao")
    throw new Error(`--targets: noop, file, s3 or openbao, not ${t}`);
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
    // Serving once /readyz says so (the fetcher executables hashed and signed), as a balancer waits.
    const ready =
      url && out.includes("controllers:") && (await fetch(`${url}/readyz`).catch(() => null))?.status === 200;
    if (ready) return { server: { url, child, log } as Server, controller };
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

/** One request of a machine's sequence, for any target; `check` answers an error or nothing. */
interface Spec {
  readonly method: string;
  path(i: number): string;
  headers(i: number): Record<string, string>;
  body?(i: number): string | Buffer;
  check(status: number, body: string, i: number): string | undefined;
}

/** A target under load: its publish (a machine's requests, in order), fetch and status. */
interface Target {
  readonly label: string;
  readonly url: string;
  readonly pid: number | undefined;
  readonly publish: readonly Spec[];
  readonly fetch: Spec;
  status(phase: string): Spec;
  stop(): Promise<void>;
}

const p = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] as number) : Number.NaN;
};

interface Ctx {
  machine: number;
  startedAt: number;
  sentAt: number;
}

/**
 * One autocannon run of `specs` per machine (the first request takes the next machine), every
 * answer checked and timed: `kindOf(k)` names request k's kind; a publish is timed from its
 * first request to its last answer. Returns the seconds to the last answer (autocannon itself
 * ends a run on its next 1 s tick).
 */
async function drive(
  url: string,
  specs: readonly Spec[],
  kindOf: (k: number) => Kind,
  latencies: Record<Kind, number[]>,
  errors: string[],
): Promise<number> {
  let next = 0;
  let lastAnswer = 0;
  const started = performance.now();
  const requests: Step<Ctx>[] = specs.map((spec, k) => ({
    method: spec.method,
    setupRequest: (req, ctx) => {
      // autocannon may build one request past a connection's last: a machine number past
      // the end, never sent (if it were, its answer would count as an error).
      if (k === 0) {
        ctx.machine = next++;
        ctx.startedAt = performance.now();
      }
      ctx.sentAt = performance.now();
      const i = ctx.machine;
      return {
        ...req,
        path: spec.path(i),
        headers: spec.headers(i),
        ...(spec.body ? { body: spec.body(i) } : {}),
      };
    },
    onResponse: (status, body, ctx) => {
      lastAnswer = performance.now();
      const kind = kindOf(k);
      if (kind !== "publish") latencies[kind].push(lastAnswer - ctx.sentAt);
      else if (k === specs.length - 1) latencies.publish.push(lastAnswer - ctx.startedAt);
      const problem = spec.check(status, body, ctx.machine);
      if (problem !== undefined) errors.push(`${kind} m${ctx.machine}: ${problem}`);
    },
  }));
  const result = await autocannon<Ctx>({
    url,
    connections: CONNECTIONS,
    amount: MACHINES * specs.length,
    timeout: 60,
    requests,
  });
  if (result.errors || result.timeouts)
    errors.push(`autocannon: ${result.errors} socket errors, ${result.timeouts} timeouts`);
  return (lastAnswer - started) / 1000;
}

const statusOf = (want: number[], status: number, body: string) =>
  want.includes(status) ? undefined : `${status} ${body.slice(0, 200)}`;

async function startBootseal(store: string, dir: string): Promise<Target> {
  let storeConfig: Record<string, unknown> = { store: `file://${join(dir, "store")}` };
  let extraEnv: NodeJS.ProcessEnv = {};
  let dropBucket = async () => {};
  if (store === "s3") {
    const endpoint = env.BOOTSEAL_TEST_S3_SEAWEEDFS_ENDPOINT;
    const accessKeyId = env.BOOTSEAL_TEST_S3_SEAWEEDFS_ACCESS_KEY;
    const secretAccessKey = env.BOOTSEAL_TEST_S3_SEAWEEDFS_SECRET_KEY;
    if (!endpoint || !accessKeyId || !secretAccessKey)
      throw new Error("s3: no SeaweedFS peer (source .peers/env)");
    const s3 = new S3Client({
      endpoint,
      region: "us-east-1",
      forcePathStyle: true,
      credentials: { accessKeyId, secretAccessKey },
    });
    const Bucket = `cannon-${randomBytes(6).toString("hex")}`;
    await s3.send(new CreateBucketCommand({ Bucket }));
    dropBucket = async () => {
      for (;;) {
        const page = await s3.send(new ListObjectsV2Command({ Bucket }));
        const keys = (page.Contents ?? []).map((c) => ({ Key: c.Key }));
        if (keys.length === 0) break;
        await s3.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: keys } }));
      }
      await s3.send(new DeleteBucketCommand({ Bucket }));
      s3.destroy();
    };
    storeConfig = {
      store: `s3://${Bucket}/storm`,
      s3: { endpoint, region: "us-east-1", forcePathStyle: true },
    };
    extraEnv = { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey };
  }
  const { server, controller } = await startServer(dir, storeConfig, extraEnv);
  const tokens: (string | undefined)[] = [];
  const path = (i: number, what: string) => `/v1/machines/storm/m${i}/${what}`;
  const machine = (i: number) => ({ authorization: `Bearer ${tokens[i] ?? "none"}` });
  return {
    label: `bootseal, ${store === "s3" ? "SeaweedFS S3" : "file store"}`,
    url: server.url,
    pid: server.child.pid,
    publish: [
      {
        method: "PUT",
        path: (i) => path(i, "config"),
        headers: () => ({
          authorization: `Bearer ${controller}`,
          "content-type": "application/octet-stream",
        }),
        body: (i) => payloadOf(`m${i}`),
        check: (status, body, i) => {
          if (status !== 201) return statusOf([201], status, body);
          const token = (JSON.parse(body) as { bootstrapToken?: unknown }).bootstrapToken;
          if (typeof token !== "string") return "no bootstrapToken";
          tokens[i] = token;
        },
      },
    ],
    fetch: {
      method: "GET",
      path: (i) => path(i, "config"),
      headers: machine,
      check: (status, body) =>
        statusOf([200], status, body) ??
        (body.includes('"sops"') && body.includes("ENC[AES256_GCM,") ? undefined : "not a SOPS document"),
    },
    status: (phase) => ({
      method: "POST",
      path: (i) => path(i, "status"),
      headers: (i) => ({ ...machine(i), "content-type": "application/json" }),
      body: () => JSON.stringify({ phase, message: "autocannon storm" }),
      check: (status, body) => statusOf([200, 202], status, body),
    }),
    stop: async () => {
      await stopServer(server);
      await dropBucket();
    },
  };
}

/** The no-op server's program (`node -e`): what any HTTP server must do, and nothing else. */
const NOOP_SERVER = `
const http = require("node:http");
const body = Buffer.from('{"bootstrapToken":"noop","version":1}');
const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(req.method === "PUT" ? 201 : 200, { "content-type": "application/json", "content-length": body.length });
    res.end(body);
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, "127.0.0.1", () => console.log("listening on http://127.0.0.1:" + server.address().port));
process.once("SIGTERM", () => { server.close(() => process.exit(0)); server.closeAllConnections(); });
`;

async function startNoop(dir: string): Promise<Target> {
  const log = join(dir, "noop.log");
  const fd = openSync(log, "a");
  const child = spawn(process.execPath, ["-e", NOOP_SERVER], { stdio: ["ignore", fd, fd] });
  closeSync(fd);
  let url: string | undefined;
  for (let waited = 0; ; waited += 50) {
    url = /listening on (http\S+)/.exec(readFileSync(log, "utf8"))?.[1];
    if (url !== undefined) break;
    if (child.exitCode !== null || waited > 10_000) {
      child.kill("SIGKILL");
      throw new Error(`the no-op server did not start: ${readFileSync(log, "utf8").slice(-500)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const ok = (want: number) => (status: number, body: string) => statusOf([want], status, body);
  const path = (i: number, what: string) => `/v1/machines/storm/m${i}/${what}`;
  return {
    label: "no-op HTTP server (the client's ceiling)",
    url,
    pid: child.pid,
    publish: [
      {
        method: "PUT",
        path: (i) => path(i, "config"),
        headers: () => ({ "content-type": "application/octet-stream" }),
        body: (i) => payloadOf(`m${i}`),
        check: ok(201),
      },
    ],
    fetch: { method: "GET", path: (i) => path(i, "config"), headers: () => ({}), check: ok(200) },
    status: (phase) => ({
      method: "POST",
      path: (i) => path(i, "status"),
      headers: () => ({ "content-type": "application/json" }),
      body: () => JSON.stringify({ phase, message: "autocannon storm" }),
      check: ok(200),
    }),
    stop: () => stopServer({ url, child, log }),
  };
}

/** A free loopback port (the kernel's pick). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * OpenBao as the issue runs it: raft storage on disk, KV v2, a publisher token with a policy
 * of its own (not root), and per machine a token from a role whose one policy is templated on
 * the token's entity alias (the machine's name): its config readable, its status writable,
 * nothing else. Publish = the secret write, then the token: two requests.
 */
/** The fields of OpenBao's answers the set-up reads. */
interface BaoAnswer {
  readonly root_token?: string;
  readonly keys_base64?: string[];
  readonly auth?: { readonly client_token?: string };
  readonly "token/"?: { readonly accessor?: string };
}

async function startOpenBao(dir: string): Promise<Target> {
  const bin = env.BOOTSEAL_TEST_BAO_BIN;
  if (!bin) throw new Error("openbao: no BOOTSEAL_TEST_BAO_BIN (source .peers/env)");
  const port = await freePort();
  const cluster = await freePort();
  const url = `http://127.0.0.1:${port}`;
  mkdirSync(join(dir, "raft"));
  const hcl = join(dir, "bao.hcl");
  writeFileSync(
    hcl,
    `storage "raft" {\n path = "${join(dir, "raft")}"\n node_id = "cannon"\n}\n` +
      `listener "tcp" {\n address = "127.0.0.1:${port}"\n cluster_address = "127.0.0.1:${cluster}"\n tls_disable = true\n}\n` +
      `api_addr = "${url}"\ncluster_addr = "https://127.0.0.1:${cluster}"\ndisable_mlock = true\n`,
  );
  const log = join(dir, "bao.log");
  const fd = openSync(log, "a");
  const child = spawn(bin, ["server", `-config=${hcl}`], {
    stdio: ["ignore", fd, fd],
    cwd: dir,
    env: { PATH: env.PATH, HOME: dir },
  });
  closeSync(fd);
  const call = async (method: string, path: string, token?: string, body?: unknown) => {
    const res = await fetch(`${url}/v1/${path}`, {
      method,
      headers: { "content-type": "application/json", ...(token ? { "x-vault-token": token } : {}) },
      body: body === undefined ? null : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    return { status: res.status, json: (text ? JSON.parse(text) : {}) as BaoAnswer };
  };
  const until = async (what: string, test: () => Promise<boolean>) => {
    for (const end = Date.now() + 60_000; Date.now() < end; await new Promise((r) => setTimeout(r, 200))) {
      if (child.exitCode !== null)
        throw new Error(`openbao exited: ${readFileSync(log, "utf8").slice(-2000)}`);
      if (await test().catch(() => false)) return;
    }
    throw new Error(`openbao: not ${what} in 60 s`);
  };
  const stop = () => stopServer({ url, child, log });
  let publisher = "";
  try {
    await until("listening", async () => (await call("GET", "sys/health")).status === 501);
    const init = await call("PUT", "sys/init", undefined, { secret_shares: 1, secret_threshold: 1 });
    const root = init.json.root_token ?? "";
    await call("PUT", "sys/unseal", undefined, { key: init.json.keys_base64?.[0] });
    await until("active", async () => (await call("GET", "sys/health")).status === 200);
    const must = async (what: string, r: Promise<{ status: number }>) => {
      const { status } = await r;
      if (status !== 200 && status !== 204) throw new Error(`openbao ${what}: ${status}`);
    };
    await must("mount", call("POST", "sys/mounts/cannon", root, { type: "kv", options: { version: "2" } }));
    const accessor = (await call("GET", "sys/auth", root)).json["token/"]?.accessor;
    if (!root || !accessor) throw new Error("openbao: no root token or token accessor");
    const name = `{{identity.entity.aliases.${accessor}.name}}`;
    await must(
      "machine policy",
      call("PUT", "sys/policies/acl/cannon-machine", root, {
        policy: `path "cannon/data/m/${name}/config" { capabilities = ["read"] }\npath "cannon/data/m/${name}/status" { capabilities = ["create", "update"] }\n`,
      }),
    );
    await must(
      "publisher policy",
      call("PUT", "sys/policies/acl/cannon-publisher", root, {
        policy: `path "cannon/data/m/*" { capabilities = ["create", "update"] }\npath "auth/token/create/cannon-machine" { capabilities = ["create", "update"] }\n`,
      }),
    );
    await must(
      "role",
      call("POST", "auth/token/roles/cannon-machine", root, {
        allowed_policies: ["cannon-machine"],
        allowed_entity_aliases: ["*"],
        token_no_default_policy: true,
        token_ttl: "1h",
        orphan: true,
      }),
    );
    publisher =
      (await call("POST", "auth/token/create", root, { policies: ["cannon-publisher"], ttl: "4h" })).json.auth
        ?.client_token ?? "";
    if (!publisher) throw new Error("openbao: no publisher token");
    // A fresh KV v2 mount finishes its set-up in the background: until a write lands.
    await until(
      "writable",
      async () => (await call("POST", "cannon/data/ready", root, { data: {} })).status === 200,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  const tokens: (string | undefined)[] = [];
  const path = (i: number, what: string) => `/v1/cannon/data/m/m${i}/${what}`;
  const as = (token: string | undefined) => ({
    "x-vault-token": token ?? "none",
    "content-type": "application/json",
  });
  return {
    label: "OpenBao, raft on disk",
    url,
    pid: child.pid,
    publish: [
      {
        method: "POST",
        path: (i) => path(i, "config"),
        headers: () => as(publisher),
        body: (i) => JSON.stringify({ data: { payload: payloadOf(`m${i}`).toString() } }),
        check: (status, body) => statusOf([200, 204], status, body),
      },
      {
        method: "POST",
        path: () => "/v1/auth/token/create/cannon-machine",
        headers: () => as(publisher),
        body: (i) => JSON.stringify({ entity_alias: `m${i}` }),
        check: (status, body, i) => {
          if (status !== 200) return statusOf([200], status, body);
          const token = (JSON.parse(body) as { auth?: { client_token?: unknown } }).auth?.client_token;
          if (typeof token !== "string") return "no client_token";
          tokens[i] = token;
        },
      },
    ],
    fetch: {
      method: "GET",
      path: (i) => path(i, "config"),
      headers: (i) => as(tokens[i]),
      check: (status, body, i) => {
        if (status !== 200) return statusOf([200], status, body);
        const payload = (JSON.parse(body) as { data?: { data?: { payload?: string } } }).data?.data?.payload;
        return payload?.startsWith(`#cloud-config\n# m${i}\n`) ? undefined : "not the secret written";
      },
    },
    status: (phase) => ({
      method: "POST",
      path: (i) => path(i, "status"),
      headers: (i) => as(tokens[i]),
      body: () => JSON.stringify({ data: { phase, message: "autocannon storm" } }),
      check: (status, body) => statusOf([200, 204], status, body),
    }),
    stop,
  };
}

async function runTarget(name: string): Promise<Record<string, string | number>> {
  const dir = mkdtempSync(join(tmpdir(), `bootseal-cannon-${name}-`));
  let target: Target | undefined;
  try {
    target =
      name === "openbao"
        ? await startOpenBao(dir)
        : name === "noop"
          ? await startNoop(dir)
          : await startBootseal(name, dir);
    const latencies: Record<Kind, number[]> = { publish: [], fetch: [], status: [] };
    const errors: string[] = [];
    const cpu0 = cpuMs(target.pid);
    const client0 = process.cpuUsage();
    const pubSeconds = await drive(target.url, target.publish, () => "publish", latencies, errors);
    const cpu1 = cpuMs(target.pid);
    const storm = [target.fetch, ...PHASES.map((ph) => (target as Target).status(ph))];
    const stormSeconds = await drive(
      target.url,
      storm,
      (k) => (k === 0 ? "fetch" : "status"),
      latencies,
      errors,
    );
    const cpu2 = cpuMs(target.pid);
    const client = process.cpuUsage(client0);
    const row = {
      target: target.label,
      machines: MACHINES,
      "storm machines/s": Math.round(MACHINES / stormSeconds),
      "storm req/s": Math.round((MACHINES * storm.length) / stormSeconds),
      "publish/s": Math.round(MACHINES / pubSeconds),
      "publish p99 ms": Math.round(p(latencies.publish, 0.99)),
      "fetch p99 ms": Math.round(p(latencies.fetch, 0.99)),
      "status p99 ms": Math.round(p(latencies.status, 0.99)),
      "server CPU ms/machine (publish + storm)": `${((cpu1 - cpu0) / MACHINES).toFixed(1)} + ${((cpu2 - cpu1) / MACHINES).toFixed(1)}`,
      "client CPU ms/machine": ((client.user + client.system) / 1000 / MACHINES).toFixed(1),
      errors: errors.length,
    };
    console.log(`\n== ${target.label} (${target.url}): ${MACHINES} machines, ${CONNECTIONS} connections`);
    console.log(
      `  publish ${pubSeconds.toFixed(1)} s, storm ${stormSeconds.toFixed(1)} s; answers timed: publish ${latencies.publish.length}, fetch ${latencies.fetch.length}, status ${latencies.status.length}`,
    );
    for (const [k, v] of Object.entries(row)) console.log(`  ${k}: ${v}`);
    for (const e of errors.slice(0, 20)) console.log(`  ERROR ${e}`);
    return row;
  } finally {
    await target?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(
  `bench/autocannon-storm: ${MACHINES} machines${MACHINES !== REQUESTED ? ` (${REQUESTED} rounded up to whole machines per connection)` : ""}, ${CONNECTIONS} connections, ${PAYLOAD_BYTES / 1024} KiB payload, node ${npmStartFlags().join(" ")} dist/cli/main.js serve; autocannon ${JSON.parse(readFileSync(join(REPO, "node_modules/autocannon/package.json"), "utf8")).version}`,
);
const rows: Record<string, string | number>[] = [];
for (const t of TARGETS) rows.push(await runTarget(t));
const heads = Object.keys(rows[0] ?? {});
console.log(`\n| ${heads.join(" | ")} |\n|${heads.map(() => " --- |").join("")}`);
for (const r of rows) console.log(`| ${heads.map((h) => r[h]).join(" | ")} |`);
const bao = rows.find((r) => String(r.target).startsWith("OpenBao"));
const noop = rows.find((r) => String(r.target).startsWith("no-op"));
if (bao) {
  const ratio = (r: Record<string, string | number>, k: string) =>
    `${(Number(r[k]) / Number(bao[k])).toFixed(2)}×`;
  for (const r of rows)
    if (r !== bao && r !== noop)
      console.log(
        `${r.target} ÷ OpenBao: storm machines/s ${ratio(r, "storm machines/s")}, publish/s ${ratio(r, "publish/s")}, p99 fetch ${ratio(r, "fetch p99 ms")}, status ${ratio(r, "status p99 ms")}, publish ${ratio(r, "publish p99 ms")}`,
      );
}
if (noop)
  for (const r of rows)
    if (r !== noop && r !== bao)
      console.log(
        `${r.target}: storm ${Math.round((100 * Number(r["storm machines/s"])) / Number(noop["storm machines/s"]))} % of the no-op server's machines/s`,
      );
if (rows.some((r) => r.errors !== 0)) exit(1);
