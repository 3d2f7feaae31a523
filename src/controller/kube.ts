/**
 * Kubernetes access for the controller, through @kubernetes/client-node: the kubeconfig
 * (--kubeconfig, else in-cluster, else KUBECONFIG / ~/.kube/config), typed reads that answer
 * null for 404, creates, merge patches (with the object's resourceVersion where a lost race
 * must fail), the BootsealConfig status subresource, and informers. Errors become
 * KubeErrors carrying only the status and the API server's short message.
 */

import { existsSync } from "node:fs";
import {
  ApisApi,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  KubernetesObjectApi,
  makeInformer,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { BootsealError } from "../errors.ts";
import { GROUP, PLURAL, VERSION } from "./spec.ts";

export type KObject = KubernetesObject & Record<string, unknown>;

/** A refused or failed Kubernetes call: its HTTP status (0: no answer). */
export class KubeError extends BootsealError {
  readonly status: number;
  constructor(status: number, message: string, cause?: unknown) {
    super(
      status === 403 ? "FORBIDDEN" : status === 0 || status >= 500 ? "SERVICE_UNAVAILABLE" : "BAD_INPUT",
      message,
      {
        cause,
      },
    );
    this.name = "KubeError";
    this.status = status;
  }
  override get retryable(): boolean {
    return this.status === 0 || this.status === 409 || this.status === 429 || this.status >= 500;
  }
}

const IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/** --kubeconfig F, else in-cluster (the ServiceAccount mount), else KUBECONFIG or ~/.kube/config. */
export function loadKubeConfig(file: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (file !== undefined) kc.loadFromFile(file);
    else if (process.env.KUBERNETES_SERVICE_HOST && existsSync(IN_CLUSTER_TOKEN)) kc.loadFromCluster();
    else kc.loadFromDefault();
  } catch (err) {
    throw new BootsealError("USAGE", `the kubeconfig cannot be read: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (!kc.getCurrentCluster())
    throw new BootsealError("USAGE", "no Kubernetes cluster configured (--kubeconfig)");
  return kc;
}

function statusOf(err: unknown): number {
  const code = (err as { code?: unknown }).code;
  return typeof code === "number" ? code : 0;
}

function shortMessage(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  let text: unknown = body;
  if (typeof body === "string") {
    try {
      text = (JSON.parse(body) as { message?: unknown }).message;
    } catch {
      text = undefined;
    }
  } else if (body && typeof body === "object") text = (body as { message?: unknown }).message;
  if (typeof text === "string") return text.slice(0, 300);
  const status = statusOf(err);
  return status === 0 ? `no answer (${(err as Error).message?.slice(0, 200)})` : `HTTP ${status}`;
}

export function kubeError(err: unknown, what: string): KubeError {
  if (err instanceof KubeError) return err;
  return new KubeError(statusOf(err), `${what}: ${shortMessage(err)}`, err);
}

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

export interface Ref {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
}

export class Kube {
  readonly kc: KubeConfig;
  readonly #objects: KubernetesObjectApi;
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;
  readonly coordination: CoordinationV1Api;
  /** API group -> its preferred version (discovery; a group's versions change with its CRDs only). */
  readonly #preferred = new Map<string, string>();

  constructor(kc: KubeConfig) {
    this.kc = kc;
    this.#objects = KubernetesObjectApi.makeApiClient(kc);
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.core = kc.makeApiClient(CoreV1Api);
    this.coordination = kc.makeApiClient(CoordinationV1Api);
  }

  /** The object, or null when it does not exist (or its kind is not installed). */
  async get<T extends KObject = KObject>(ref: Ref): Promise<T | null> {
    try {
      return (await this.#objects.read({
        apiVersion: ref.apiVersion,
        kind: ref.kind,
        metadata: { name: ref.name, namespace: ref.namespace },
      })) as T;
    } catch (err) {
      if (statusOf(err) === 404) return null;
      throw kubeError(err, `get ${ref.kind} ${ref.namespace}/${ref.name}`);
    }
  }

  /**
   * The preferred version of an API group, for a Cluster API v1beta2 reference that names only
   * its group (as Cluster API itself resolves it); null when the group is not served.
   */
  async preferredVersion(group: string): Promise<string | null> {
    const known = this.#preferred.get(group);
    if (known) return known;
    let groups: { name: string; preferredVersion?: { groupVersion: string } }[];
    try {
      groups = (await this.kc.makeApiClient(ApisApi).getAPIVersions()).groups;
    } catch (err) {
      throw kubeError(err, "API discovery");
    }
    for (const g of groups)
      if (g.preferredVersion) this.#preferred.set(g.name, g.preferredVersion.groupVersion);
    return this.#preferred.get(group) ?? null;
  }

  async create<T extends KObject = KObject>(obj: KObject): Promise<T> {
    try {
      return (await this.#objects.create(obj)) as T;
    } catch (err) {
      throw kubeError(err, `create ${obj.kind} ${obj.metadata?.namespace}/${obj.metadata?.name}`);
    }
  }

  async replace<T extends KObject = KObject>(obj: KObject): Promise<T> {
    try {
      return (await this.#objects.replace(obj)) as T;
    } catch (err) {
      throw kubeError(err, `update ${obj.kind} ${obj.metadata?.namespace}/${obj.metadata?.name}`);
    }
  }

  /** A JSON merge patch; put metadata.resourceVersion in it to make it conditional. */
  async mergePatch<T extends KObject = KObject>(ref: Ref, patch: Record<string, unknown>): Promise<T> {
    const meta = (patch.metadata ?? {}) as Record<string, unknown>;
    const body = {
      ...patch,
      apiVersion: ref.apiVersion,
      kind: ref.kind,
      metadata: { ...meta, name: ref.name, namespace: ref.namespace },
    };
    try {
      return (await this.#objects.patch(
        body as KObject,
        undefined,
        undefined,
        "bootseal-controller",
        undefined,
        PatchStrategy.MergePatch,
      )) as T;
    } catch (err) {
      throw kubeError(err, `patch ${ref.kind} ${ref.namespace}/${ref.name}`);
    }
  }

  /** The BootsealConfig's status subresource, as a merge patch. */
  async patchStatus(namespace: string, name: string, status: Record<string, unknown>): Promise<void> {
    try {
      await this.custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace, plural: PLURAL, name, body: { status } },
        MERGE,
      );
    } catch (err) {
      throw kubeError(err, `patch status of BootsealConfig ${namespace}/${name}`);
    }
  }

  /** An informer over a list path (`/apis/G/V[/namespaces/NS]/PLURAL`). */
  informer<T extends KObject>(
    path: string,
    list: () => Promise<KubernetesListObject<T>>,
    labelSelector?: string,
  ): ReturnType<typeof makeInformer<T>> {
    return makeInformer<T>(this.kc, path, list, labelSelector);
  }
}

/** `/apis/GROUP/VERSION[/namespaces/NS]/PLURAL` (core: `/api/v1/...`). */
export function listPath(apiVersion: string, plural: string, namespace: string | undefined): string {
  const base = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  return namespace ? `${base}/namespaces/${namespace}/${plural}` : `${base}/${plural}`;
}
