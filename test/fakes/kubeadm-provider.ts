/**
 * The kubeadm-provider double: a stand-in for Cluster API's kubeadm bootstrap controller
 * (sigs.k8s.io/cluster-api bootstrap/kubeadm), used by test/controller/e2e.test.ts. The real
 * provider (v1.14.2) now runs in the suite (the capi peer; test/controller/capi-real.test.ts);
 * these tests predate it and are moving to it (issue #29). It talks to the real kube-apiserver
 * and writes what the real one writes, from its kubeadmconfig_controller.go:
 *
 * - it reconciles a KubeadmConfig only once its owner reference of kind Machine resolves, the
 *   Machine's spec.clusterName names a Cluster, the Cluster has
 *   status.initialization.infrastructureProvisioned, and (a join config) the Cluster's
 *   ControlPlaneInitialized condition is True;
 * - storeBootstrapData: a Secret named like the config, type cluster.x-k8s.io/secret, label
 *   cluster.x-k8s.io/cluster-name, one owner reference (KubeadmConfig, controller: true), keys
 *   `value` and `format` (spec.format, default cloud-config);
 * - then status.dataSecretName, status.initialization.dataSecretCreated, the
 *   DataSecretAvailable condition (reason Available) and its v1beta1 twin under
 *   status.deprecated.v1beta1.conditions, status.observedGeneration.
 *
 * The bootstrap data is the fixture a real kubeadm provider rendered for a join
 * (test/fixtures/e2e/kubeadm-join.yaml, or ignition-join.json for format ignition), with the
 * node name from the config's joinConfiguration and the sentinel under $BOOTSEAL_ROOT (the test
 * machine is a directory).
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { REPO } from "../fetcher/helpers.ts";

const G = "bootstrap.cluster.x-k8s.io";
const V = "v1beta2";

// biome-ignore lint/suspicious/noExplicitAny: API objects
type Any = any;

export interface KubeadmProviderDouble {
  /** Configs it wrote a data secret for, `ns/name`. */
  readonly written: string[];
  stop(): Promise<void>;
}

/** Reconciles the namespace's KubeadmConfigs every `everyMs` until stopped. */
export function startKubeadmProviderDouble(
  kc: KubeConfig,
  namespace: string,
  opts: { everyMs?: number; data?: (config: Any) => Promise<string> } = {},
): KubeadmProviderDouble {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  const written: string[] = [];
  let stopped = false;
  const render =
    opts.data ??
    (async (config: Any) => {
      if (config.spec?.format === "ignition")
        return readFile(join(REPO, "test/fixtures/e2e/ignition-join.json"), "utf8");
      const text = await readFile(join(REPO, "test/fixtures/e2e/kubeadm-join.yaml"), "utf8");
      const node = config.spec?.joinConfiguration?.nodeRegistration?.name;
      // The sentinel under the test machine's root (on a machine BOOTSEAL_ROOT is /), as
      // test/e2e/userdata-kubeadm.test.ts does with the same fixture.
      const rooted = text.replace("> /run/cluster-api/", "> $BOOTSEAL_ROOT/run/cluster-api/");
      return node ? rooted.replace("name: worker-0", `name: ${node}`) : rooted;
    });

  async function reconcileOne(config: Any): Promise<void> {
    if (config.status?.initialization?.dataSecretCreated) return;
    const owner = (config.metadata.ownerReferences ?? []).find(
      (r: Any) => r.kind === "Machine" && String(r.apiVersion).startsWith("cluster.x-k8s.io/"),
    );
    if (!owner) return;
    const machine: Any = await custom
      .getNamespacedCustomObject({
        group: "cluster.x-k8s.io",
        version: V,
        namespace,
        plural: "machines",
        name: owner.name,
      })
      .catch(() => null);
    if (!machine) return;
    const cluster: Any = await custom
      .getNamespacedCustomObject({
        group: "cluster.x-k8s.io",
        version: V,
        namespace,
        plural: "clusters",
        name: machine.spec.clusterName,
      })
      .catch(() => null);
    if (!cluster?.status?.initialization?.infrastructureProvisioned) return;
    const cpInitialized = (cluster.status.conditions ?? []).some(
      (c: Any) => c.type === "ControlPlaneInitialized" && c.status === "True",
    );
    if (config.spec?.joinConfiguration && !cpInitialized) return;
    const data = await render(config);
    const format = config.spec?.format || "cloud-config";
    const secret = {
      apiVersion: "v1",
      kind: "Secret",
      type: "cluster.x-k8s.io/secret",
      metadata: {
        name: config.metadata.name,
        namespace,
        labels: { "cluster.x-k8s.io/cluster-name": cluster.metadata.name },
        ownerReferences: [
          {
            apiVersion: `${G}/${V}`,
            kind: "KubeadmConfig",
            name: config.metadata.name,
            uid: config.metadata.uid,
            controller: true,
          },
        ],
      },
      data: { value: Buffer.from(data).toString("base64"), format: Buffer.from(format).toString("base64") },
    };
    try {
      await core.createNamespacedSecret({ namespace, body: secret });
    } catch (err) {
      if ((err as Any).code !== 409) throw err;
      await core.replaceNamespacedSecret({ namespace, name: config.metadata.name, body: secret });
    }
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    await custom.replaceNamespacedCustomObjectStatus({
      group: G,
      version: V,
      namespace,
      plural: "kubeadmconfigs",
      name: config.metadata.name,
      body: {
        ...config,
        status: {
          ...config.status,
          dataSecretName: config.metadata.name,
          initialization: { dataSecretCreated: true },
          observedGeneration: config.metadata.generation,
          conditions: [
            {
              type: "DataSecretAvailable",
              status: "True",
              reason: "Available",
              message: "",
              lastTransitionTime: now,
              observedGeneration: config.metadata.generation,
            },
          ],
          deprecated: {
            v1beta1: {
              conditions: [{ type: "DataSecretAvailable", status: "True", lastTransitionTime: now }],
            },
          },
        },
      },
    });
    written.push(`${namespace}/${config.metadata.name}`);
  }

  const loop = (async () => {
    while (!stopped) {
      try {
        const list: Any = await custom.listNamespacedCustomObject({
          group: G,
          version: V,
          namespace,
          plural: "kubeadmconfigs",
        });
        for (const config of list.items) await reconcileOne(config).catch(() => {});
      } catch {
        // the next round
      }
      await new Promise((r) => setTimeout(r, opts.everyMs ?? 200));
    }
  })();
  return {
    written,
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}
