/**
 * The real Cluster API path's world: Cluster API v1.14's own core manager and kubeadm bootstrap
 * provider (the capi peer, scripts/peers/capi-run.ts) reconcile every object a test creates
 * here, because each carries the peer's watch-filter label. The test plays only the parts no
 * Cluster API controller plays: the infrastructure provider (a TestMachine's providerID and
 * `provisioned`, test/fixtures/capi/infrastructure-crds.yaml) and the workload cluster's kubelet
 * (a Node with that providerID, in the kube peer, which is also the workload cluster: its
 * `<cluster>-kubeconfig` secret points back at it).
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { type E2EService, ensureBundle, startE2EService } from "../e2e/service.ts";
import { type AgeKey, ageKey, REPO, tempDir } from "../fetcher/helpers.ts";
import { peer } from "../helpers/peers.ts";
import { until } from "../helpers/until.ts";
import {
  type Any,
  applyCrds,
  BSC,
  CAPI,
  condition,
  core,
  custom,
  installCrds,
  KUBEADM,
  kubeconfigFile,
  MERGE,
  secret,
  waitConfig,
} from "./harness.ts";

export const INFRA = { group: "infrastructure.bootseal.test", version: "v1alpha1" };
/** The Kubernetes version on every Machine: the kubeadm provider refuses a Machine without one. */
export const K8S_VERSION = "v1.34.4";

/** Labels that hand an object to the capi peer's controllers (their --watch-filter) and name its Cluster. */
export const realLabels = (cluster: string, extra: Record<string, string> = {}) => ({
  "cluster.x-k8s.io/watch-filter": peer("CAPI_WATCH_FILTER"),
  "cluster.x-k8s.io/cluster-name": cluster,
  ...extra,
});

/** The test infrastructure provider's CRDs, created or updated, then established. */
export async function installTestInfrastructure(): Promise<void> {
  const text = await readFile(join(REPO, "test/fixtures/capi/infrastructure-crds.yaml"), "utf8");
  await applyCrds(parseAllDocuments(text).map((doc) => doc.toJS() as Any));
}

/**
 * A Cluster whose infrastructure is a TestCluster (provisioned now, or later with
 * `provisionCluster`) and with no control-plane object (Cluster API then marks its control plane
 * initialised once a control-plane Machine has a nodeRef); its endpoint and `<name>-kubeconfig`
 * secret name the kube peer.
 */
export async function createRealCluster(
  ns: string,
  name: string,
  opts: { paused?: boolean; provisioned?: boolean } = {},
): Promise<Any> {
  const server = new URL(peer("KUBE_SERVER"));
  const ca = Buffer.from(await readFile(peer("KUBE_CA_FILE"))).toString("base64");
  const kubeconfig = [
    "apiVersion: v1",
    "kind: Config",
    `clusters:\n- name: ${name}\n  cluster:\n    server: ${server.origin}\n    certificate-authority-data: ${ca}`,
    `users:\n- name: admin\n  user:\n    token: ${peer("KUBE_ADMIN_TOKEN")}`,
    `contexts:\n- name: admin\n  context:\n    cluster: ${name}\n    user: admin`,
    "current-context: admin",
    "",
  ].join("\n");
  await core().createNamespacedSecret({
    namespace: ns,
    body: {
      metadata: { name: `${name}-kubeconfig`, labels: realLabels(name) },
      type: "cluster.x-k8s.io/secret",
      data: { value: Buffer.from(kubeconfig).toString("base64") },
    },
  });
  await custom().createNamespacedCustomObject({
    ...INFRA,
    namespace: ns,
    plural: "testclusters",
    body: {
      apiVersion: `${INFRA.group}/${INFRA.version}`,
      kind: "TestCluster",
      metadata: { name, namespace: ns, labels: realLabels(name) },
      spec: {},
    },
  });
  const cluster = await custom().createNamespacedCustomObject({
    ...CAPI,
    namespace: ns,
    plural: "clusters",
    body: {
      apiVersion: `${CAPI.group}/${CAPI.version}`,
      kind: "Cluster",
      metadata: { name, namespace: ns, labels: realLabels(name) },
      spec: {
        controlPlaneEndpoint: { host: server.hostname, port: Number(server.port) },
        infrastructureRef: { apiGroup: INFRA.group, kind: "TestCluster", name },
        ...(opts.paused ? { paused: true } : {}),
      },
    },
  });
  if (opts.provisioned !== false) await provisionCluster(ns, name);
  return cluster;
}

/** The infrastructure provider's part: the TestCluster is provisioned. */
export async function provisionCluster(ns: string, name: string): Promise<void> {
  await custom().patchNamespacedCustomObjectStatus(
    {
      ...INFRA,
      namespace: ns,
      plural: "testclusters",
      name,
      body: { status: { initialization: { provisioned: true }, ready: true } },
    },
    MERGE,
  );
}

/** A BootsealConfig's spec wrapping a KubeadmConfig's. */
export const kubeadm = (spec: Record<string, unknown>) => ({
  inner: { apiVersion: `${KUBEADM.group}/${KUBEADM.version}`, kind: "KubeadmConfig", spec },
});
export const initSpec = (node: string) =>
  kubeadm({ initConfiguration: { nodeRegistration: { name: node } } });
export const joinSpec = (node: string, extra: Record<string, unknown> = {}) =>
  kubeadm({ joinConfiguration: { nodeRegistration: { name: node } }, ...extra });

export interface RealMachine {
  readonly name: string;
  readonly controlPlane?: boolean;
  /** The BootsealConfig's spec (created without owner: Cluster API's Machine controller adds it). */
  readonly bootseal?: Record<string, unknown>;
  /** Instead of `bootseal`: a KubeadmConfig's spec, the Machine's own bootstrap config (no bootseal). */
  readonly kubeadm?: Record<string, unknown>;
}

/**
 * A TestMachine, a bootstrap config (a BootsealConfig, or a plain KubeadmConfig) and the Machine
 * naming both, as a user or a MachineSet creates them.
 */
export async function createRealMachine(ns: string, cluster: string, m: RealMachine): Promise<Any> {
  const c = custom();
  const labels = realLabels(cluster, m.controlPlane ? { "cluster.x-k8s.io/control-plane": "" } : {});
  await c.createNamespacedCustomObject({
    ...INFRA,
    namespace: ns,
    plural: "testmachines",
    body: {
      apiVersion: `${INFRA.group}/${INFRA.version}`,
      kind: "TestMachine",
      metadata: { name: m.name, namespace: ns, labels },
      spec: {},
    },
  });
  const config = m.kubeadm ? { ...KUBEADM, kind: "KubeadmConfig" } : { ...BSC, kind: "BootsealConfig" };
  await c.createNamespacedCustomObject({
    ...config,
    namespace: ns,
    body: {
      apiVersion: `${config.group}/${config.version}`,
      kind: config.kind,
      metadata: { name: m.name, namespace: ns, labels },
      spec: m.kubeadm ?? m.bootseal,
    },
  });
  return c.createNamespacedCustomObject({
    ...CAPI,
    namespace: ns,
    plural: "machines",
    body: {
      apiVersion: `${CAPI.group}/${CAPI.version}`,
      kind: "Machine",
      metadata: { name: m.name, namespace: ns, labels },
      spec: {
        clusterName: cluster,
        version: K8S_VERSION,
        bootstrap: { configRef: { apiGroup: config.group, kind: config.kind, name: m.name } },
        infrastructureRef: { apiGroup: INFRA.group, kind: "TestMachine", name: m.name },
      },
    },
  });
}

export const providerId = (ns: string, name: string) => `bootseal-test://${ns}/${name}`;

/**
 * The machine booted: its infrastructure provider reports it provisioned with its providerID,
 * and its kubelet registered a Node with that providerID (in the workload cluster, the kube peer).
 */
export async function bootMachine(ns: string, name: string): Promise<void> {
  const id = providerId(ns, name);
  await custom().patchNamespacedCustomObject(
    { ...INFRA, namespace: ns, plural: "testmachines", name, body: { spec: { providerID: id } } },
    MERGE,
  );
  await custom().patchNamespacedCustomObjectStatus(
    {
      ...INFRA,
      namespace: ns,
      plural: "testmachines",
      name,
      body: { status: { initialization: { provisioned: true }, ready: true } },
    },
    MERGE,
  );
  await core().createNode({ body: { metadata: { name: nodeName(ns, name) }, spec: { providerID: id } } });
}

export const nodeName = (ns: string, name: string) => `${ns}-${name}`.slice(0, 63);

export async function deleteNodes(ns: string, names: readonly string[]): Promise<void> {
  for (const n of names)
    await core()
      .deleteNode({ name: nodeName(ns, n) })
      .catch(() => {});
}

/**
 * An initialised control plane, so that workers get join data: control-plane Machine `cp-0`,
 * whose init data the kubeadm provider writes, is booted; returns once Cluster API has set its
 * nodeRef and the Cluster's `ControlPlaneInitialized` condition. `via: "bootseal"` wraps its
 * KubeadmConfig in a BootsealConfig (a running controller must publish it); `via: "kubeadm"`
 * has the Machine name a KubeadmConfig directly, for tests whose controller cannot publish on
 * purpose.
 */
export async function initialiseControlPlane(
  ns: string,
  cluster: string,
  via: "bootseal" | "kubeadm",
): Promise<void> {
  const name = "cp-0";
  if (via === "bootseal") {
    await createRealMachine(ns, cluster, { name, controlPlane: true, bootseal: initSpec(name) });
    await waitConfig(ns, name, `${name} published`, (o) => condition(o, "Published")?.status === "True");
  } else {
    await createRealMachine(ns, cluster, {
      name,
      controlPlane: true,
      kubeadm: { initConfiguration: { nodeRegistration: { name } } },
    });
  }
  await until(
    `Cluster API names ${name}'s data secret on the Machine`,
    async () => (await getMachine(ns, name)).spec.bootstrap.dataSecretName !== undefined,
    { tries: 1200 },
  );
  await bootMachine(ns, name);
  await until(
    `Cluster API marks ${cluster}'s control plane initialised`,
    async () => {
      const c: Any = await custom().getNamespacedCustomObject({
        ...CAPI,
        namespace: ns,
        plural: "clusters",
        name: cluster,
      });
      return condition(c, "ControlPlaneInitialized")?.status === "True";
    },
    { tries: 1200 },
  );
}

/** The kubeadm provider's own data secret for an inner config: its bytes, checked to be its own. */
export async function innerData(ns: string, inner: string): Promise<Buffer> {
  const s = await secret(ns, inner);
  assert.deepEqual(
    s.metadata.ownerReferences.filter((r: Any) => r.controller).map((r: Any) => [r.kind, r.name]),
    [["KubeadmConfig", inner]],
    "the data secret is the kubeadm provider's",
  );
  return Buffer.from(s.data.value, "base64");
}

export const getMachine = (ns: string, name: string): Promise<Any> =>
  custom().getNamespacedCustomObject({ ...CAPI, namespace: ns, plural: "machines", name }) as Promise<Any>;

export const getKubeadmConfig = (ns: string, name: string): Promise<Any> =>
  custom().getNamespacedCustomObject({ ...KUBEADM, namespace: ns, name }) as Promise<Any>;

/** What a controller end-to-end file shares: its directory, the machine's age key, the service, a kubeconfig. */
export interface ControllerWorld {
  readonly dir: string;
  readonly key: AgeKey;
  readonly service: E2EService;
  readonly kubeconfig: string;
  close(): Promise<void>;
}

/**
 * The service as `npm start` starts it (test/e2e/service.ts) for the machine's age key, serving
 * as its fetcher the real single executable from the package's sea/, with Cluster API's and
 * bootseal's CRDs and the test infrastructure provider installed, and a kubeconfig for the
 * controller. `service` adds to the service's options (it may write files into the directory first).
 */
export async function controllerWorld(
  prefix: string,
  service: (dir: string) => Promise<Partial<Parameters<typeof startE2EService>[0]>> = async () => ({}),
): Promise<ControllerWorld> {
  await ensureBundle();
  const dir = await tempDir(prefix);
  const key = await ageKey(dir.path, "machine");
  const started = await startE2EService({
    dir: dir.path,
    ageRecipient: key.recipient,
    bootstrapCommands: [],
    ...(await service(dir.path)),
  });
  await installCrds();
  await installTestInfrastructure();
  const kubeconfig = await kubeconfigFile(dir.path);
  return {
    dir: dir.path,
    key,
    service: started,
    kubeconfig,
    close: async () => {
      await started.stop();
      await dir.remove();
    },
  };
}
