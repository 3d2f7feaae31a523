/**
 * The controller tests' world: the kube peer's API server with the Cluster API CRDs (capi
 * peer) and ours installed, a fresh namespace per test, BootsealConfig look-ups and waits,
 * `bootseal controller` as a child process, a relay to cut the service off, and the machine's
 * side of a stub. The Cluster API objects themselves (reconciled by the real Cluster API) are
 * made in capi-world.ts.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { parse } from "yaml";
import { kubeRequest } from "../../scripts/peers/kube-request.ts";
import { effective, envFileValues, systemdArgv, underRoot, writeUnder } from "../e2e/machine.ts";
import { CLI, REPO, type RunResult, run } from "../fetcher/helpers.ts";
import { stopChild } from "../helpers/child.ts";
import { peer, uniqueName } from "../helpers/peers.ts";
import { until } from "../helpers/until.ts";

// biome-ignore lint/suspicious/noExplicitAny: API objects
export type Any = any;

export const BSC = { group: "bootstrap.bootseal.dev", version: "v1alpha1", plural: "bootsealconfigs" };
export const CAPI = { group: "cluster.x-k8s.io", version: "v1beta2" };
export const KUBEADM = { group: "bootstrap.cluster.x-k8s.io", version: "v1beta2", plural: "kubeadmconfigs" };
/** The request option of a JSON merge patch. */
export const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

export function adminKubeConfig(token = peer("KUBE_ADMIN_TOKEN")): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "peer", server: peer("KUBE_SERVER"), caFile: peer("KUBE_CA_FILE") }],
    users: [{ name: "u", token }],
    contexts: [{ name: "c", cluster: "peer", user: "u" }],
    currentContext: "c",
  });
  return kc;
}

export const kc = () => adminKubeConfig();
export const custom = () => kc().makeApiClient(CustomObjectsApi);
export const core = () => kc().makeApiClient(CoreV1Api);

/** A kubeconfig file for the controller process. */
export async function kubeconfigFile(dir: string, token = peer("KUBE_ADMIN_TOKEN")): Promise<string> {
  const file = join(dir, `kubeconfig-${uniqueName("k")}`);
  const ca = Buffer.from(await readFile(peer("KUBE_CA_FILE"))).toString("base64");
  await writeFile(
    file,
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      `- name: peer\n  cluster:\n    server: ${peer("KUBE_SERVER")}\n    certificate-authority-data: ${ca}`,
      `users:\n- name: u\n  user:\n    token: ${token}`,
      "contexts:\n- name: c\n  context:\n    cluster: peer\n    user: u",
      "current-context: c",
      "",
    ].join("\n"),
    { mode: 0o600 },
  );
  return file;
}

/** One raw request with the admin token (scripts/peers/kube-request.ts). */
export async function rawRequest(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Any }> {
  const target = {
    server: peer("KUBE_SERVER"),
    ca: await readFile(peer("KUBE_CA_FILE")),
    token: peer("KUBE_ADMIN_TOKEN"),
  };
  return kubeRequest(target, method, path, body);
}

/** CRDs created or updated (as written), then established. */
export async function applyCrds(crds: readonly Any[]): Promise<void> {
  const base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  for (const crd of crds) {
    let r = await rawRequest("POST", base, crd);
    if (r.status === 409) {
      const old = await rawRequest("GET", `${base}/${crd.metadata.name}`);
      crd.metadata.resourceVersion = old.body.metadata.resourceVersion;
      r = await rawRequest("PUT", `${base}/${crd.metadata.name}`, crd);
    }
    assert.ok(
      r.status === 200 || r.status === 201,
      `CRD ${crd.metadata.name}: ${JSON.stringify(r.body).slice(0, 2000)}`,
    );
    await until(`CRD ${crd.metadata.name} established`, async () => {
      const c = await rawRequest("GET", `${base}/${crd.metadata.name}`);
      return (c.body.status?.conditions ?? []).some(
        (x: Any) => x.type === "Established" && x.status === "True",
      );
    });
  }
}

/** bootseal's CRDs from the chart (Cluster API's own are applied by the capi peer, with their contract labels). */
export async function installCrds(): Promise<void> {
  const files = [
    "deploy/helm/bootseal/crds/bootstrap.bootseal.dev_bootsealconfigs.yaml",
    "deploy/helm/bootseal/crds/bootstrap.bootseal.dev_bootsealconfigtemplates.yaml",
  ];
  await applyCrds(await Promise.all(files.map(async (f) => parse(await readFile(join(REPO, f), "utf8")))));
}

export async function namespace(prefix: string): Promise<string> {
  const name = uniqueName(prefix)
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .slice(0, 50);
  await core().createNamespace({ body: { metadata: { name } } });
  return name;
}

export const getConfig = (ns: string, name: string): Promise<Any> =>
  custom().getNamespacedCustomObject({ ...BSC, namespace: ns, name }) as Promise<Any>;

export const condition = (obj: Any, type: string): Any =>
  (obj?.status?.conditions ?? []).find((c: Any) => c.type === type);

/** Waits (bounded) until the BootsealConfig passes `check`; returns it. */
export async function waitConfig(
  ns: string,
  name: string,
  what: string,
  check: (o: Any) => boolean,
): Promise<Any> {
  let last: Any;
  try {
    await until(
      what,
      async () => {
        last = await getConfig(ns, name).catch(() => undefined);
        return last !== undefined && check(last);
      },
      { tries: 1800 },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last status: ${JSON.stringify(last?.status)}`);
  }
  return last;
}

export const secret = (ns: string, name: string): Promise<Any> =>
  core().readNamespacedSecret({ namespace: ns, name }) as Promise<Any>;

export interface ControllerProcess {
  readonly process: ChildProcess;
  log(): string;
  stop(): Promise<number | null>;
  kill9(): Promise<void>;
}

/** `bootseal controller` from the source tree, health server on a free port (port 0). */
export function startController(
  args: readonly string[],
  env: Record<string, string | undefined> = {},
): ControllerProcess {
  const child = spawn(process.execPath, [CLI, "controller", "--health-listen", "127.0.0.1:0", ...args], {
    cwd: REPO,
    env: { PATH: process.env.PATH, HOME: "/nonexistent", ...env } as NodeJS.ProcessEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (c) => {
    output += c;
  });
  child.stderr?.on("data", (c) => {
    output += c;
  });
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return {
    process: child,
    log: () => output,
    stop: () => stopChild(child, { output: () => output }),
    kill9: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}

/** A TCP relay in front of the service: `down()` closes it (connections refused), `up()` reopens it on the same port. */
export async function relay(
  target: URL,
): Promise<{ url: string; down(): Promise<void>; up(): Promise<void>; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const open = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((client) => {
        const upstream = connect(Number(target.port), target.hostname);
        sockets.add(client);
        sockets.add(upstream);
        client.pipe(upstream).pipe(client);
        const drop = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on("error", drop);
        upstream.on("error", drop);
        client.on("close", drop);
        upstream.on("close", drop);
      });
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => {
        port = (s.address() as { port: number }).port;
        server = s;
        resolve();
      });
    });
  const down = async () => {
    const s = server;
    server = undefined;
    for (const sock of sockets) sock.destroy();
    sockets.clear();
    if (s) await new Promise<void>((r) => s.close(() => r()));
  };
  await open();
  return { url: `http://127.0.0.1:${port}`, down, up: open, close: down };
}

/**
 * What cloud-init and systemd do with a cloud-init stub, under `root`: write_files, the install
 * script (ExecStartPre), then the fetch line (ExecStart) with a stand-in kubeadm on PATH.
 * `privateRun`: the fetch runs with the unit's UMask, in a mount namespace of its own with `<root>/run` over `/run`, so
 * the commands of a real provider's payload (its sentinel `echo success >
 * /run/cluster-api/bootstrap-success.complete`) land in the machine's directory, not the host's.
 */
export async function runCloudInitStub(
  stub: string,
  root: string,
  env: { ageKeyFile: string; kubeadmExit: number; privateRun?: boolean; tpmTcti?: string },
): Promise<RunResult> {
  const doc = parse(stub, { version: "1.1" }) as {
    write_files: { path: string; permissions: string; content: string }[];
  };
  for (const f of doc.write_files)
    await writeUnder(root, f.path, f.content, Number.parseInt(f.permissions, 8));
  await writeUnder(
    root,
    "usr/local/sbin/kubeadm",
    '#!/bin/sh\nprintf "%s\\n" "$@" > "$KUBEADM_ARGS"\nexit "$KUBEADM_EXIT"\n',
    0o755,
  );
  const unit = await readFile(join(root, "etc/systemd/system/bootseal-fetch.service"), "utf8");
  // systemd reads the unit's drop-ins in name order after it (a machine logging in with its
  // identity gets its fetch command from one).
  const dropinDir = join(root, "etc/systemd/system/bootseal-fetch.service.d");
  const dropins = await Promise.all(
    (await readdir(dropinDir).catch(() => [] as string[]))
      .filter((n) => n.endsWith(".conf"))
      .sort()
      .map((n) => readFile(join(dropinDir, n), "utf8")),
  );
  const fetchEnv = envFileValues(await readFile(join(root, "etc/bootseal/fetch.env"), "utf8"));
  const pre = effective("ExecStartPre", unit, dropins);
  const install = underRoot(systemdArgv(pre[0] as string, fetchEnv), root);
  const i = await run(
    install.slice(1),
    {
      ...fetchEnv,
      PATH: process.env.PATH,
      BOOTSEAL_BIN: join(root, "usr/local/bin/bootseal"),
      BOOTSEAL_ARTIFACT_PUBKEY: join(root, "etc/bootseal/artifact.pub"),
    },
    install[0],
    180_000,
  );
  assert.equal(i.code, 0, i.stderr);
  const [line] = effective("ExecStart", unit, dropins);
  const argv = underRoot(systemdArgv(line as string, fetchEnv), root);
  assert.deepEqual(argv.slice(1, 3), ["fetch", "--from"]);
  const machineEnv = {
    ...fetchEnv,
    PATH: `${join(root, "usr/local/sbin")}:${process.env.PATH}`,
    HOME: "/nonexistent",
    SOPS_AGE_KEY_FILE: env.ageKeyFile,
    KUBEADM_ARGS: join(root, "kubeadm.args"),
    KUBEADM_EXIT: String(env.kubeadmExit),
    ...(env.tpmTcti ? { BOOTSEAL_TPM_TCTI: env.tpmTcti } : {}),
  };
  if (!env.privateRun) return run(argv.slice(1), machineEnv, argv[0], 180_000);
  await mkdir(join(root, "run"), { recursive: true });
  // As systemd starts the unit: its UMask (0077: bootseal's own secrets stay private; what the
  // payload makes must still come out as cloud-init makes it).
  const umask = effective("UMask", unit, dropins).at(-1) ?? "0022";
  const mountRun = `umask ${umask} && mount --bind "$0/run" /run && exec "$@"`;
  return run(["-m", "sh", "-c", mountRun, root, ...argv], machineEnv, "unshare", 180_000);
}
