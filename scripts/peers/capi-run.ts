/**
 * Runs Cluster API's own controllers against the kube peer (scripts/peers/capi.sh starts this as
 * the `capi` peer): the core manager (Cluster, MachineDeployment, MachineSet, Machine,
 * MachineHealthCheck) and the kubeadm bootstrap provider (CABPK), both built from
 * sigs.k8s.io/cluster-api. Before they start: Cluster API's CRDs are applied, and each
 * manager's admission webhooks are registered with the API server by URL on 127.0.0.1 with a
 * self-signed certificate (they cannot be switched off, and a manager whose webhooks are not
 * registered lets invalid objects through that the real one refuses).
 *
 * Both watch only objects labelled `cluster.x-k8s.io/watch-filter: <CAPI_WATCH_FILTER>` (Cluster
 * API's own --watch-filter): a test that wants the real controllers labels its objects, and the
 * real controllers never touch another test's objects. The process exits when either manager
 * does, so the peer's liveness check sees it.
 *
 * Environment: KUBE_SERVER, KUBE_CA_FILE, KUBE_ADMIN_TOKEN, CAPI_DIR (crds/, webhooks/),
 * CAPI_CORE_BIN, CAPI_KUBEADM_BIN, CAPI_CERT_DIR (tls.crt, tls.key), CAPI_WATCH_FILTER, and the
 * ports CAPI_CORE_WEBHOOK_PORT, CAPI_CORE_HEALTH_PORT, CAPI_CORE_METRICS_PORT,
 * CAPI_KUBEADM_WEBHOOK_PORT, CAPI_KUBEADM_HEALTH_PORT, CAPI_KUBEADM_METRICS_PORT.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { type KubeObject, kubeRequest } from "./kube-request.ts";

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`capi-run: ${name} is not set`);
  return v;
};

const SERVER = env("KUBE_SERVER");
const CA = readFileSync(env("KUBE_CA_FILE"));
const TOKEN = env("KUBE_ADMIN_TOKEN");
const DIR = env("CAPI_DIR");
const CERT_DIR = env("CAPI_CERT_DIR");

type Obj = KubeObject;
const TARGET = { server: SERVER, ca: CA, token: TOKEN };
const call = (method: string, path: string, body?: unknown) => kubeRequest(TARGET, method, path, body);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what: string, check: () => Promise<boolean>, seconds = 120): Promise<void> {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`capi-run: ${what}: not within ${seconds} s`);
    await sleep(300);
  }
}

/** Creates the object or replaces it at its current resourceVersion. */
async function apply(base: string, obj: Obj): Promise<void> {
  let r = await call("POST", base, obj);
  if (r.status === 409) {
    const old = await call("GET", `${base}/${obj.metadata.name}`);
    obj.metadata.resourceVersion = old.body?.metadata?.resourceVersion;
    r = await call("PUT", `${base}/${obj.metadata.name}`, obj);
  }
  if (r.status !== 200 && r.status !== 201) {
    throw new Error(
      `capi-run: ${obj.kind} ${obj.metadata.name}: ${r.status} ${JSON.stringify(r.body).slice(0, 500)}`,
    );
  }
}

function documents(file: string): Obj[] {
  return parseAllDocuments(readFileSync(file, "utf8"))
    .map((d) => d.toJS())
    .filter((d) => d && typeof d === "object");
}

async function applyCrds(): Promise<void> {
  const base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  const crds = readdirSync(join(DIR, "crds"))
    .sort()
    .flatMap((f) => documents(join(DIR, "crds", f)));
  // Cluster API's own install (its kustomizations) labels its CRDs with the contract versions
  // they serve; the core manager reads the label to know which version of a kind to use.
  for (const crd of crds) {
    crd.metadata.labels = {
      ...crd.metadata.labels,
      "cluster.x-k8s.io/v1beta1": "v1beta1",
      "cluster.x-k8s.io/v1beta2": "v1beta2",
    };
    await apply(base, crd);
  }
  for (const crd of crds) {
    await waitFor(`CRD ${crd.metadata.name} established`, async () => {
      const c = await call("GET", `${base}/${crd.metadata.name}`);
      return (c.body.status?.conditions ?? []).some(
        (x: Obj) => x.type === "Established" && x.status === "True",
      );
    });
  }
}

/** A manager's webhook configurations, pointed at its server on 127.0.0.1 and named after it. */
async function registerWebhooks(manager: string, file: string, port: number): Promise<void> {
  const caBundle = readFileSync(join(CERT_DIR, "tls.crt")).toString("base64");
  for (const cfg of documents(file)) {
    cfg.metadata.name = `capi-${manager}-${cfg.metadata.name}`;
    for (const hook of cfg.webhooks ?? []) {
      const path = hook.clientConfig.service.path;
      hook.clientConfig = { url: `https://127.0.0.1:${port}${path}`, caBundle };
      hook.timeoutSeconds = 30;
    }
    const plural = cfg.kind === "MutatingWebhookConfiguration" ? "mutating" : "validating";
    await apply(`/apis/admissionregistration.k8s.io/v1/${plural}webhookconfigurations`, cfg);
  }
}

function kubeconfig(): string {
  const file = join(CERT_DIR, "kubeconfig");
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "peer", cluster: { server: SERVER, "certificate-authority-data": CA.toString("base64") } },
      ],
      users: [{ name: "admin", user: { token: TOKEN } }],
      contexts: [{ name: "peer", context: { cluster: "peer", user: "admin" } }],
      "current-context": "peer",
    }),
    { mode: 0o600 },
  );
  return file;
}

function start(name: string, bin: string, args: readonly string[]): Promise<number | null> {
  const child = spawn(bin, args, { stdio: ["ignore", "inherit", "inherit"] });
  process.on("SIGTERM", () => child.kill("SIGTERM"));
  return new Promise((resolve) =>
    child.on("exit", (code, signal) => {
      console.error(`capi-run: ${name} exited (${signal ?? code})`);
      resolve(code ?? 1);
    }),
  );
}

async function main(): Promise<void> {
  await waitFor("the kube peer answers", async () => (await call("GET", "/readyz")).status === 200, 180);
  await applyCrds();
  const port = (n: string) => Number(env(n));
  await registerWebhooks("core", join(DIR, "webhooks/core.yaml"), port("CAPI_CORE_WEBHOOK_PORT"));
  await registerWebhooks("kubeadm", join(DIR, "webhooks/kubeadm.yaml"), port("CAPI_KUBEADM_WEBHOOK_PORT"));
  const config = kubeconfig();
  const common = (prefix: string) => [
    `--kubeconfig=${config}`,
    "--leader-elect=false",
    `--watch-filter=${env("CAPI_WATCH_FILTER")}`,
    `--health-addr=127.0.0.1:${port(`${prefix}_HEALTH_PORT`)}`,
    `--diagnostics-address=127.0.0.1:${port(`${prefix}_METRICS_PORT`)}`,
    "--insecure-diagnostics",
    `--webhook-port=${port(`${prefix}_WEBHOOK_PORT`)}`,
    `--webhook-cert-dir=${CERT_DIR}`,
  ];
  const exited = await Promise.race([
    start("core manager", env("CAPI_CORE_BIN"), common("CAPI_CORE")),
    start("kubeadm bootstrap provider", env("CAPI_KUBEADM_BIN"), [
      ...common("CAPI_KUBEADM"),
      "--feature-gates=KubeadmBootstrapFormatIgnition=true",
    ]),
  ]);
  process.exit(exited === 0 ? 1 : exited);
}

main().catch((err: unknown) => {
  console.error((err as Error).stack ?? String(err));
  process.exit(1);
});
