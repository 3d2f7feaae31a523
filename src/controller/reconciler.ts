/**
 * One reconcile of one BootsealConfig (docs/controller.md, "Reconcile"): Machine -> inner
 * config -> inner data secret -> publish (only when the inner data changed) -> the stub in the
 * BootsealConfig's own data secret -> status and conditions from the machine's phase ->
 * cleanup (finalizer; nodeRef). Level-triggered: every step reads what is there and does
 * only what is missing, so a resync, a restart or a duplicate event changes nothing.
 * It never sleeps: it answers when to look again, and the queue does the waiting.
 */
import { createHash } from "node:crypto";
import { isBootsealError } from "../errors.ts";
import { isDnsLabel, type MachineId } from "../machine/machine-id.ts";
import { isTerminalPhase as isTerminal } from "../machine/status-protocol.ts";
import { type Condition, type ConditionInput, setCondition } from "./conditions.ts";
import { type KObject, type Kube, KubeError } from "./kube.ts";
import { phaseView } from "./phase-conditions.ts";
import { type ServiceApi, serviceFailure } from "./service-api.ts";
import {
  ANNOTATION_CONFIG_DELETED,
  ANNOTATION_MACHINE,
  ANNOTATION_PUBLISHED_SHA256,
  ANNOTATION_PUBLISHED_VERSION,
  API_VERSION,
  type BootsealConfigSpec,
  CAPI_GROUP,
  CLUSTER_NAME_LABEL,
  CLUSTER_SECRET_TYPE,
  dataSecretName,
  FINALIZER,
  innerName,
  KIND,
  payloadMismatch,
  SECRET_FORMAT,
  validateSpec,
} from "./spec.ts";

export interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export interface ReconcilerDeps {
  readonly kube: Kube;
  readonly service: ServiceApi;
  readonly log: Log;
  /** How often a machine still booting is looked at (events wake it earlier). */
  readonly pollMs: number;
  /** How often an inner config not ready yet is looked at. */
  readonly waitMs: number;
  readonly now?: () => Date;
}

/** What the queue does next with the key. */
export interface Outcome {
  /** Look again after this long (success: the backoff is reset). */
  readonly requeueAfterMs?: number;
  /** A failure: back off (at least `retryAfterMs`). */
  readonly failed?: { readonly retryAfterMs?: number; readonly reason: string };
}

interface Meta {
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
type Obj = KObject & { metadata: Meta; spec?: Record<string, unknown>; status?: Record<string, unknown> };

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** The status the reconcile builds up, written once at the end when it differs. */
class StatusDraft {
  readonly #old: Record<string, unknown>;
  readonly #next: Record<string, unknown>;
  readonly #gen: number | undefined;
  readonly #now: Date;

  constructor(obj: Obj, now: Date) {
    this.#old = obj.status ?? {};
    this.#next = structuredClone(this.#old);
    this.#gen = obj.metadata.generation;
    this.#now = now;
    if (this.#gen !== undefined) this.#next.observedGeneration = this.#gen;
  }

  set(c: ConditionInput): this {
    this.#next.conditions = setCondition(
      this.#next.conditions as Condition[] | undefined,
      c,
      this.#gen,
      this.#now,
    );
    return this;
  }

  field(key: string, value: unknown): this {
    if (value === undefined) delete this.#next[key];
    else this.#next[key] = value;
    return this;
  }

  get changed(): boolean {
    return JSON.stringify(this.#old) !== JSON.stringify(this.#next);
  }

  get value(): Record<string, unknown> {
    return this.#next;
  }
}

function cond(
  type: string,
  status: "True" | "False" | "Unknown",
  reason: string,
  message = "",
): ConditionInput {
  return { type, status, reason, message };
}

/** The Machine that owns a bootstrap config (Cluster API sets the owner reference). */
export function ownerMachine(obj: {
  metadata: Meta;
}): { apiVersion: string; name: string; uid: string } | undefined {
  return obj.metadata.ownerReferences?.find(
    (r) => r.kind === "Machine" && r.apiVersion.startsWith(`${CAPI_GROUP}/`),
  );
}

export class Reconciler {
  readonly #d: ReconcilerDeps;
  /** `<ns>/<machine>` -> the BootsealConfig key, for the service's events. */
  readonly machines = new Map<string, string>();

  constructor(deps: ReconcilerDeps) {
    this.#d = deps;
  }

  #now(): Date {
    return this.#d.now ? this.#d.now() : new Date();
  }

  async reconcile(namespace: string, name: string): Promise<Outcome> {
    const { kube } = this.#d;
    const obj = await kube.get<Obj>({ apiVersion: API_VERSION, kind: KIND, namespace, name });
    if (!obj) {
      for (const [m, k] of this.machines) if (k === `${namespace}/${name}`) this.machines.delete(m);
      return {};
    }
    const draft = new StatusDraft(obj, this.#now());
    if (obj.metadata.deletionTimestamp)
      return this.#finalize(obj, draft, "the BootsealConfig is being deleted");

    const ref = ownerMachine(obj);
    if (!ref) {
      draft.set(cond("Ready", "False", "WaitingForMachine", "no Machine owns this BootsealConfig yet"));
      return this.#write(obj, draft, {});
    }
    const machine = await kube.get<Obj>({
      apiVersion: ref.apiVersion,
      kind: "Machine",
      namespace,
      name: ref.name,
    });
    if (!machine || machine.metadata.uid !== ref.uid || machine.metadata.deletionTimestamp) {
      return this.#finalize(obj, draft, `Machine ${ref.name} is deleted`);
    }
    if (!isDnsLabel(namespace) || !isDnsLabel(ref.name)) {
      const msg = `the machine id ${namespace}/${ref.name} is not two DNS-1123 labels (bootseal's machine id rule)`;
      draft.set(cond("InnerConfigReady", "False", "InvalidMachineName", msg));
      draft.set(cond("Ready", "False", "InvalidMachineName", msg));
      return this.#write(obj, draft, {});
    }
    const m: MachineId = { namespace, name: ref.name };
    const machineKey = `${namespace}/${ref.name}`;
    this.machines.set(machineKey, `${namespace}/${name}`);

    // The finalizer and the machine id first: from here on the service may hold a config.
    const annotations = obj.metadata.annotations ?? {};
    if (
      !(obj.metadata.finalizers ?? []).includes(FINALIZER) ||
      annotations[ANNOTATION_MACHINE] !== machineKey
    ) {
      const patched = await kube.mergePatch<Obj>(
        { apiVersion: API_VERSION, kind: KIND, namespace, name },
        {
          metadata: {
            resourceVersion: obj.metadata.resourceVersion,
            finalizers: [...new Set([...(obj.metadata.finalizers ?? []), FINALIZER])],
            annotations: { [ANNOTATION_MACHINE]: machineKey },
          },
        },
      );
      obj.metadata = patched.metadata;
    }

    let spec: BootsealConfigSpec;
    try {
      spec = validateSpec(obj.spec);
    } catch (err) {
      const msg = isBootsealError(err) ? err.message : "the spec is not valid";
      draft.set(cond("InnerConfigReady", "False", "InvalidSpec", msg));
      draft.set(cond("Ready", "False", "InvalidSpec", msg));
      return this.#write(obj, draft, {});
    }

    const clusterName =
      ((machine.spec as { clusterName?: unknown } | undefined)?.clusterName as string | undefined) ??
      machine.metadata.labels?.[CLUSTER_NAME_LABEL] ??
      obj.metadata.labels?.[CLUSTER_NAME_LABEL] ??
      "";

    // The inner config: created once, reconciled by its own provider.
    const inner = await this.#ensureInner(obj, machine, spec, clusterName, draft);
    if (!inner) return this.#write(obj, draft, { requeueAfterMs: this.#d.waitMs });
    draft.field("innerRef", {
      apiVersion: spec.inner.apiVersion,
      kind: spec.inner.kind,
      name: innerName(name),
    });
    const innerStatus = (inner.status ?? {}) as {
      dataSecretName?: string;
      ready?: boolean;
      initialization?: { dataSecretCreated?: boolean };
    };
    const innerSecret = innerStatus.dataSecretName;
    const innerCreated = innerStatus.initialization?.dataSecretCreated === true || innerStatus.ready === true;
    const waiting = (message: string) => {
      draft.set(cond("InnerConfigReady", "False", "WaitingForDataSecret", message));
      if (draft.value.dataSecretName === undefined) {
        draft.set(cond("DataSecretAvailable", "False", "WaitingForInnerConfig", message));
        draft.set(cond("Ready", "False", "WaitingForInnerConfig", message));
      }
      return this.#write(obj, draft, { requeueAfterMs: this.#d.waitMs });
    };
    if (!innerSecret || !innerCreated)
      return waiting(`${spec.inner.kind} ${innerName(name)} has no data secret yet`);
    const secret = await kube.get<Obj & { data?: Record<string, string> }>({
      apiVersion: "v1",
      kind: "Secret",
      namespace,
      name: innerSecret,
    });
    const b64 = secret?.data?.value;
    if (!b64)
      return waiting(
        `the data secret ${innerSecret} of ${spec.inner.kind} ${innerName(name)} has no value yet`,
      );
    const data = new Uint8Array(Buffer.from(b64, "base64"));
    const mismatch = payloadMismatch(spec.payload, data);
    if (mismatch) {
      draft.set(
        cond("InnerConfigReady", "False", "PayloadMismatch", `spec.payload is ${spec.payload}: ${mismatch}`),
      );
      draft.set(cond("Ready", "False", "PayloadMismatch", mismatch));
      return this.#write(obj, draft, {});
    }
    draft.set(
      cond("InnerConfigReady", "True", "DataSecretAvailable", `${spec.inner.kind} ${innerName(name)}`),
    );

    // Publish only what the service does not hold yet.
    const digest = sha256(data);
    const configDeleted = obj.metadata.annotations?.[ANNOTATION_CONFIG_DELETED] === "true";
    let version = obj.metadata.annotations?.[ANNOTATION_PUBLISHED_VERSION];
    if (obj.metadata.annotations?.[ANNOTATION_PUBLISHED_SHA256] !== digest && !configDeleted) {
      let published: { version: number };
      try {
        published = await this.#d.service.publish(m, data, spec.bootstrapCommand);
      } catch (err) {
        return this.#serviceDown(obj, draft, err, "publish");
      }
      version = String(published.version);
      const patched = await kube.mergePatch<Obj>(
        { apiVersion: API_VERSION, kind: KIND, namespace, name },
        {
          metadata: {
            annotations: { [ANNOTATION_PUBLISHED_SHA256]: digest, [ANNOTATION_PUBLISHED_VERSION]: version },
          },
        },
      );
      obj.metadata = patched.metadata;
      this.#d.log.info(
        { machine: machineKey, version: published.version },
        "published the inner bootstrap data",
      );
    }
    draft.set(
      cond(
        "Published",
        "True",
        configDeleted ? "ConfigDeleted" : "Published",
        configDeleted
          ? "the config was deleted from bootseal after the Machine got its nodeRef"
          : `version ${version} at the bootseal service`,
      ),
    );

    // The data secret with the stub, once per published version.
    const ownName = dataSecretName(name);
    const own = await kube.get<Obj>({ apiVersion: "v1", kind: "Secret", namespace, name: ownName });
    if (!configDeleted && (!own || own.metadata.annotations?.[ANNOTATION_PUBLISHED_VERSION] !== version)) {
      let stub: Uint8Array;
      try {
        stub = await this.#d.service.userdata(m, spec.userDataFormat);
      } catch (err) {
        return this.#serviceDown(obj, draft, err, "userdata");
      }
      await this.#writeDataSecret(obj, own, ownName, clusterName, spec, stub, version as string);
      this.#d.log.info({ machine: machineKey, secret: ownName, version }, "wrote the data secret");
    }
    if (own || !configDeleted) {
      draft.field("dataSecretName", ownName);
      draft.field("initialization", { ...(draft.value.initialization as object), dataSecretCreated: true });
      draft.field("ready", true);
      draft.set(cond("DataSecretAvailable", "True", "DataSecretAvailable", `Secret ${ownName}`));
    }

    // The machine's phase.
    let phase: string | undefined = draft.value.phase as string | undefined;
    try {
      const status = await this.#d.service.status(m);
      if (status) {
        const view = phaseView(status);
        phase = view.phase;
        draft.field("phase", view.phase);
        draft.set(view.condition);
      }
    } catch (err) {
      const f = serviceFailure(err);
      draft.set(cond("MachineBootstrapped", "Unknown", f.reason, f.message));
      draft.set(cond("Ready", "True", "DataSecretAvailable", "the data secret holds the stub"));
      return this.#write(obj, draft, { failed: { reason: f.reason, ...retryAfter(f.retryAfterMs) } });
    }

    // The node registered: the config has done its job.
    const nodeRef = (machine.status as { nodeRef?: { name?: string } } | undefined)?.nodeRef?.name;
    if (spec.deleteConfigOnNodeRef && nodeRef && !configDeleted) {
      try {
        await this.#d.service.deleteConfig(m);
      } catch (err) {
        return this.#serviceDown(obj, draft, err, "delete");
      }
      const patched = await kube.mergePatch<Obj>(
        { apiVersion: API_VERSION, kind: KIND, namespace, name },
        { metadata: { annotations: { [ANNOTATION_CONFIG_DELETED]: "true" } } },
      );
      obj.metadata = patched.metadata;
      draft.set(
        cond(
          "Published",
          "True",
          "ConfigDeleted",
          `the Machine has its nodeRef (${nodeRef}): config deleted from bootseal`,
        ),
      );
      this.#d.log.info(
        { machine: machineKey, node: nodeRef },
        "deleted the config: the Machine has its nodeRef",
      );
    }
    draft.set(cond("Ready", "True", "DataSecretAvailable", "the data secret holds the stub"));
    return this.#write(obj, draft, isTerminal(phase) ? {} : { requeueAfterMs: this.#d.pollMs });
  }

  async #ensureInner(
    obj: Obj,
    machine: Obj,
    spec: BootsealConfigSpec,
    clusterName: string,
    draft: StatusDraft,
  ): Promise<Obj | null> {
    const { kube } = this.#d;
    const { namespace, name } = obj.metadata;
    const ref = {
      apiVersion: spec.inner.apiVersion,
      kind: spec.inner.kind,
      namespace,
      name: innerName(name),
    };
    const existing = await kube.get<Obj>(ref);
    if (existing) return existing;
    let innerSpec = spec.inner.spec;
    if (spec.inner.templateRef) {
      const tmpl = await kube.get<Obj>({
        apiVersion: spec.inner.apiVersion,
        kind: `${spec.inner.kind}Template`,
        namespace,
        name: spec.inner.templateRef.name,
      });
      const t = (tmpl?.spec as { template?: { spec?: Record<string, unknown> } } | undefined)?.template?.spec;
      if (!tmpl) {
        const msg = `${spec.inner.kind}Template ${spec.inner.templateRef.name} does not exist`;
        draft.set(cond("InnerConfigReady", "False", "TemplateNotFound", msg));
        draft.set(cond("Ready", "False", "TemplateNotFound", msg));
        return null;
      }
      innerSpec = t ?? {};
    }
    try {
      const created = await kube.create<Obj>({
        apiVersion: ref.apiVersion,
        kind: ref.kind,
        metadata: {
          name: ref.name,
          namespace,
          labels: clusterLabels(clusterName),
          ownerReferences: [
            {
              apiVersion: API_VERSION,
              kind: KIND,
              name,
              uid: obj.metadata.uid,
              controller: true,
              blockOwnerDeletion: true,
            },
            // The inner provider finds its Machine through this (kubeadm: the owner of kind Machine).
            {
              apiVersion: machine.apiVersion as string,
              kind: "Machine",
              name: machine.metadata.name,
              uid: machine.metadata.uid,
            },
          ],
        },
        spec: innerSpec ?? {},
      });
      this.#d.log.info(
        { machine: `${namespace}/${machine.metadata.name}`, inner: `${ref.kind}/${ref.name}` },
        "created the inner config",
      );
      return created;
    } catch (err) {
      if (err instanceof KubeError && err.status === 409) return kube.get<Obj>(ref);
      if (err instanceof KubeError && (err.status === 400 || err.status === 404 || err.status === 422)) {
        draft.set(cond("InnerConfigReady", "False", "InnerConfigRefused", err.message));
        draft.set(cond("Ready", "False", "InnerConfigRefused", err.message));
        return null;
      }
      throw err;
    }
  }

  async #writeDataSecret(
    obj: Obj,
    own: Obj | null,
    ownName: string,
    clusterName: string,
    spec: BootsealConfigSpec,
    stub: Uint8Array,
    version: string,
  ): Promise<void> {
    const { namespace, name, uid } = obj.metadata;
    const body = {
      apiVersion: "v1",
      kind: "Secret",
      type: CLUSTER_SECRET_TYPE,
      metadata: {
        name: ownName,
        namespace,
        labels: clusterLabels(clusterName),
        annotations: { [ANNOTATION_PUBLISHED_VERSION]: version },
        ownerReferences: [
          { apiVersion: API_VERSION, kind: KIND, name, uid, controller: true, blockOwnerDeletion: true },
        ],
        ...(own ? { resourceVersion: own.metadata.resourceVersion } : {}),
      },
      data: {
        value: Buffer.from(stub).toString("base64"),
        format: Buffer.from(SECRET_FORMAT[spec.userDataFormat]).toString("base64"),
      },
    };
    if (own) await this.#d.kube.replace(body);
    else await this.#d.kube.create(body);
  }

  /** Machine or BootsealConfig gone: delete the machine's config at the service, then let go. */
  async #finalize(obj: Obj, draft: StatusDraft, why: string): Promise<Outcome> {
    const { namespace, name } = obj.metadata;
    if (!(obj.metadata.finalizers ?? []).includes(FINALIZER)) return {};
    const id = obj.metadata.annotations?.[ANNOTATION_MACHINE];
    if (id) {
      const [ns, machineName] = id.split("/") as [string, string];
      try {
        const existed = await this.#d.service.deleteConfig({ namespace: ns, name: machineName });
        this.#d.log.info({ machine: id, existed, why }, "deleted the machine's config at the service");
      } catch (err) {
        return this.#serviceDown(obj, draft, err, "delete");
      }
      this.machines.delete(id);
    }
    if (!obj.metadata.deletionTimestamp) {
      draft.set(cond("Ready", "False", "MachineDeleted", why));
      draft.set(cond("Published", "False", "ConfigDeleted", "the config was deleted from bootseal"));
      await this.#d.kube.patchStatus(namespace, name, draft.value);
    }
    await this.#d.kube.mergePatch(
      { apiVersion: API_VERSION, kind: KIND, namespace, name },
      {
        metadata: {
          resourceVersion: obj.metadata.resourceVersion,
          finalizers: (obj.metadata.finalizers ?? []).filter((f) => f !== FINALIZER),
        },
      },
    );
    this.#d.log.info({ bootsealConfig: `${namespace}/${name}`, why }, "released the finalizer");
    return {};
  }

  async #serviceDown(obj: Obj, draft: StatusDraft, err: unknown, what: string): Promise<Outcome> {
    const f = serviceFailure(err);
    const message = `${what}: ${f.message}`;
    draft.set(cond("Published", "False", f.reason, message));
    if (draft.value.dataSecretName === undefined) draft.set(cond("Ready", "False", f.reason, message));
    this.#d.log.warn(
      { bootsealConfig: `${obj.metadata.namespace}/${obj.metadata.name}`, reason: f.reason, what },
      f.message,
    );
    return this.#write(obj, draft, { failed: { reason: f.reason, ...retryAfter(f.retryAfterMs) } });
  }

  async #write(obj: Obj, draft: StatusDraft, outcome: Outcome): Promise<Outcome> {
    if (draft.changed) await this.#d.kube.patchStatus(obj.metadata.namespace, obj.metadata.name, draft.value);
    return outcome;
  }
}

function retryAfter(ms: number | undefined): { retryAfterMs?: number } {
  return ms === undefined ? {} : { retryAfterMs: ms };
}

function clusterLabels(clusterName: string): Record<string, string> {
  const labels: Record<string, string> = {};
  if (clusterName) labels[CLUSTER_NAME_LABEL] = clusterName;
  return labels;
}
