/**
 * Cluster API's objects as bootseal reads and labels them: who owns a bootstrap config, who wrote
 * a data secret, what an inner provider waits on in a Cluster, Cluster API's pause, and the labels
 * bootseal's own objects carry. Pure: the reconciler does the I/O.
 */
import type { KObject } from "./kube.ts";
import {
  ANNOTATION_PUBLISHED_VERSION,
  API_VERSION,
  CAPI_GROUP,
  CLUSTER_NAME_LABEL,
  CLUSTER_SECRET_TYPE,
  KIND,
  LABEL_STUB_SECRET,
  PAUSED_ANNOTATION,
  WATCH_FILTER_LABEL,
} from "./spec.ts";

export interface Meta {
  name: string;
  namespace: string;
  uid: string;
  generation?: number;
  resourceVersion?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }[];
}
export type Obj = KObject & {
  metadata: Meta;
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
};

/** The Machine that owns a bootstrap config (Cluster API sets the owner reference). */
export function ownerMachine(obj: {
  metadata: Meta;
}): { apiVersion: string; name: string; uid: string } | undefined {
  return obj.metadata.ownerReferences?.find(
    (r) => r.kind === "Machine" && r.apiVersion.startsWith(`${CAPI_GROUP}/`),
  );
}

/** Why the config is paused (Cluster API's annotation, or its Cluster's spec.paused), or undefined. */
export function pausedBecause(obj: Obj, cluster: Obj | null): string | undefined {
  if (obj.metadata.annotations?.[PAUSED_ANNOTATION] !== undefined)
    return `the BootsealConfig has the ${PAUSED_ANNOTATION} annotation`;
  if ((cluster?.spec as { paused?: unknown } | undefined)?.paused === true)
    return `Cluster ${cluster?.metadata.name} is paused`;
  return undefined;
}

/** The Cluster API watch-filter label, when the config has one: the inner config's provider may only watch labelled objects. */
function watchFilterOf(obj: Obj): Record<string, string> {
  const value = obj.metadata.labels?.[WATCH_FILTER_LABEL];
  return value === undefined ? {} : { [WATCH_FILTER_LABEL]: value };
}

/**
 * A secret the inner config's provider wrote: never bootseal's own stub; owned by the inner
 * config, or named as it (the kubeadm provider's data secret is named after its config).
 */
export function writtenBy(inner: Obj, secret: Obj): boolean {
  if (secret.metadata.labels?.[LABEL_STUB_SECRET] !== undefined) return false;
  if (
    secret.metadata.ownerReferences?.some(
      (r) => r.kind === KIND && r.apiVersion.startsWith(`${API_VERSION.split("/")[0]}/`),
    )
  )
    return false;
  if (secret.metadata.name === inner.metadata.name) return true;
  return secret.metadata.ownerReferences?.some((r) => r.uid === inner.metadata.uid) ?? false;
}

/** What the inner provider waits on in a Cluster, as one string. */
export function clusterState(cluster: Obj): string {
  const status = (cluster.status ?? {}) as {
    initialization?: { infrastructureProvisioned?: boolean; controlPlaneInitialized?: boolean };
    conditions?: { type?: string; status?: string }[];
  };
  const cpInitialized =
    status.initialization?.controlPlaneInitialized === true ||
    (status.conditions ?? []).some((x) => x.type === "ControlPlaneInitialized" && x.status === "True");
  const paused = (cluster.spec as { paused?: unknown } | undefined)?.paused === true;
  return `infrastructureProvisioned=${status.initialization?.infrastructureProvisioned === true},controlPlaneInitialized=${cpInitialized},paused=${paused}`;
}

export function clusterLabels(clusterName: string): Record<string, string> {
  const labels: Record<string, string> = {};
  if (clusterName) labels[CLUSTER_NAME_LABEL] = clusterName;
  return labels;
}

/** The BootsealConfig as the controlling owner of what bootseal creates for it. */
function controllerRef(config: Obj) {
  const { name, uid } = config.metadata;
  return { apiVersion: API_VERSION, kind: KIND, name, uid, controller: true, blockOwnerDeletion: true };
}

/**
 * The inner config bootseal creates for a BootsealConfig: its cluster's labels (and watch filter),
 * owned by the BootsealConfig (controller) and by the Machine, through which the inner provider
 * finds its Machine (kubeadm: the owner of kind Machine).
 */
export function innerConfigBody(
  config: Obj,
  machine: Obj,
  ref: { apiVersion: string; kind: string; name: string },
  clusterName: string,
  spec: Record<string, unknown>,
): KObject {
  return {
    apiVersion: ref.apiVersion,
    kind: ref.kind,
    metadata: {
      name: ref.name,
      namespace: config.metadata.namespace,
      labels: { ...clusterLabels(clusterName), ...watchFilterOf(config) },
      ownerReferences: [
        controllerRef(config),
        {
          apiVersion: machine.apiVersion as string,
          kind: "Machine",
          name: machine.metadata.name,
          uid: machine.metadata.uid,
        },
      ],
    },
    spec,
  };
}

/** bootseal's own data secret (the contract's `cluster.x-k8s.io/secret`): the stub, never bootstrap data. */
export function stubSecretBody(
  config: Obj,
  name: string,
  clusterName: string,
  format: string,
  stub: Uint8Array,
  version: string,
  existing: Obj | null,
): KObject {
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: CLUSTER_SECRET_TYPE,
    metadata: {
      name,
      namespace: config.metadata.namespace,
      labels: { ...clusterLabels(clusterName), [LABEL_STUB_SECRET]: "true" },
      annotations: { [ANNOTATION_PUBLISHED_VERSION]: version },
      ownerReferences: [controllerRef(config)],
      ...(existing ? { resourceVersion: existing.metadata.resourceVersion } : {}),
    },
    data: { value: Buffer.from(stub).toString("base64"), format: Buffer.from(format).toString("base64") },
  };
}
