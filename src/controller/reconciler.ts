/**
 * One reconcile of one BootsealConfig (docs/controller.md, "Reconcile"), as a list of steps:
 * its Machine -> the finalizer and the machine id -> the spec -> the inner config and its data
 * secret -> publish (only when the inner data changed) -> the stub in the BootsealConfig's own
 * data secret -> status and conditions from the machine's phase -> cleanup on the nodeRef.
 * Each step either hands the next one what it found or stops the reconcile with its outcome
 * (`Stop`). The deletion of either object releases the finalizer (`#finalize`).
 * Level-triggered: every step reads what is there and does only what is missing, so a resync,
 * a restart or a duplicate event changes nothing. It never sleeps: it answers when to look
 * again, and the queue does the waiting.
 */
import { createHash } from "node:crypto";
import { isBootsealError } from "../errors.ts";
import { isDnsLabel, type MachineId } from "../machine/machine-id.ts";
import { isTerminalPhase } from "../machine/status-protocol.ts";
import {
  clusterState,
  innerConfigBody,
  type Obj,
  ownerMachine,
  pausedBecause,
  stubSecretBody,
  writtenBy,
} from "./capi-objects.ts";
import type { Condition } from "./conditions.ts";
import { type Kube, KubeError } from "./kube.ts";
import { phaseView } from "./phase-conditions.ts";
import { type ServiceApi, serviceFailure } from "./service-api.ts";
import {
  ANNOTATION_CLUSTER_STATE,
  ANNOTATION_CONFIG_DELETED,
  ANNOTATION_MACHINE,
  ANNOTATION_PUBLISHED_SHA256,
  ANNOTATION_PUBLISHED_VERSION,
  API_VERSION,
  type BootsealConfigSpec,
  CAPI_GROUP,
  CAPI_VERSION,
  CLUSTER_NAME_LABEL,
  dataSecretName,
  FINALIZER,
  innerName,
  KIND,
  payloadMismatch,
  SECRET_FORMAT,
  type TpmSealSpec,
  validateSpec,
} from "./spec.ts";
import { cond, StatusDraft } from "./status-draft.ts";
import { ekSources, type TpmSeal, tpmSealOf } from "./tpm-ek.ts";

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

/** A step ends the reconcile here (its status already written) with this outcome. */
class Stop {
  readonly outcome: Outcome;
  constructor(outcome: Outcome) {
    this.outcome = outcome;
  }
}

/** The BootsealConfig, the status it builds up, and the Machine that owns it. */
interface Owned {
  readonly obj: Obj;
  readonly draft: StatusDraft;
  readonly machine: Obj;
  /** The Cluster its cluster-name label names, when there is one. */
  readonly cluster: Obj | null;
  /** The machine's id at the service: the Machine's namespace and name. */
  readonly id: MachineId;
  /** `<ns>/<Machine name>`: the id as the annotation, the logs and `machines` spell it. */
  readonly machineKey: string;
}

/** ... with its spec, valid. */
interface Configured extends Owned {
  readonly spec: BootsealConfigSpec;
  readonly clusterName: string;
}

/**
 * The inner data to publish, or `kept`: the inner config's status names a secret its provider
 * did not write (after a clusterctl move or a restore the kubeadm provider points it at what the
 * Machine names, bootseal's own stub secret), so what the service holds stays as it is.
 */
type InnerData = Uint8Array | "kept";

/** What the service holds for the config. */
interface Publication {
  /** The published version (the annotation); undefined only once the config is deleted. */
  readonly version: string | undefined;
  /** The config was deleted from the service after the Machine got its nodeRef. */
  readonly configDeleted: boolean;
}

/** What the service holds: the inner data, and the TPM it is sealed to (a new EK republishes). */
function publishedDigest(data: Uint8Array, tpm: TpmSeal | undefined): string {
  const hash = createHash("sha256").update(data);
  if (tpm) hash.update(`\0tpm\0${tpm.ekPublic}\0${tpm.pcrs ?? ""}`);
  return hash.digest("hex");
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
    const obj = await this.#d.kube.get<Obj>({ apiVersion: API_VERSION, kind: KIND, namespace, name });
    if (!obj) return this.#forget(`${namespace}/${name}`);
    const draft = new StatusDraft(obj, this.#now());
    // Paused first, deletion included: clusterctl move pauses, then deletes the source's objects
    // (finalizers removed), and that must not delete the machine's config at the service.
    const cluster = await this.#clusterOf(obj);
    const paused = await this.#paused(obj, draft, cluster);
    if (paused) return paused.outcome;
    if (obj.metadata.deletionTimestamp)
      return this.#finalize(obj, draft, "the BootsealConfig is being deleted");

    const owned = await this.#ownerOf(obj, draft, cluster);
    if (owned instanceof Stop) return owned.outcome;
    await this.#claim(owned);
    const configured = await this.#spec(owned);
    if (configured instanceof Stop) return configured.outcome;
    const data = await this.#innerData(configured);
    if (data instanceof Stop) return data.outcome;
    const publication = await this.#publish(configured, data);
    if (publication instanceof Stop) return publication.outcome;
    const secret = await this.#dataSecret(configured, publication);
    if (secret instanceof Stop) return secret.outcome;
    const phase = await this.#phase(configured);
    if (phase instanceof Stop) return phase.outcome;
    const cleanup = await this.#nodeRef(configured, publication);
    if (cleanup instanceof Stop) return cleanup.outcome;

    if (phase === "failed") {
      // Cluster API mirrors Ready as the Machine's BootstrapConfigReady: a MachineHealthCheck on
      // it replaces the machine, and clusterctl describe shows why.
      const failure = (draft.value.conditions as Condition[] | undefined)?.find(
        (x) => x.type === "MachineBootstrapped",
      );
      draft.set(cond("Ready", "False", "BootstrapFailed", failure?.message ?? "the machine reported failed"));
    } else {
      draft.set(cond("Ready", "True", "DataSecretAvailable", "the data secret holds the stub"));
    }
    return this.#write(obj, draft, isTerminalPhase(phase) ? {} : { requeueAfterMs: this.#d.pollMs });
  }

  /** The Cluster the config's cluster-name label names (Cluster API sets it), or null. */
  async #clusterOf(obj: Obj): Promise<Obj | null> {
    const name = obj.metadata.labels?.[CLUSTER_NAME_LABEL];
    if (!name) return null;
    return this.#d.kube.get<Obj>({
      apiVersion: `${CAPI_GROUP}/${CAPI_VERSION}`,
      kind: "Cluster",
      namespace: obj.metadata.namespace,
      name,
    });
  }

  /** Cluster API's pause (the annotation, or the Cluster's spec.paused): condition Paused, nothing else. */
  async #paused(obj: Obj, draft: StatusDraft, cluster: Obj | null): Promise<Stop | undefined> {
    const why = pausedBecause(obj, cluster);
    if (why === undefined) {
      draft.set(cond("Paused", "False", "NotPaused", ""));
      return undefined;
    }
    draft.set(cond("Paused", "True", "Paused", why));
    return new Stop(await this.#write(obj, draft, {}));
  }

  /** The BootsealConfig is gone: its machine no longer maps to it. */
  #forget(configKey: string): Outcome {
    for (const [m, k] of this.machines) if (k === configKey) this.machines.delete(m);
    return {};
  }

  /** The Machine that owns the config, alive, with a name bootseal can use as a machine id. */
  async #ownerOf(obj: Obj, draft: StatusDraft, cluster: Obj | null): Promise<Owned | Stop> {
    const { namespace, name } = obj.metadata;
    const ref = ownerMachine(obj);
    if (!ref) {
      draft.set(cond("Ready", "False", "WaitingForMachine", "no Machine owns this BootsealConfig yet"));
      return new Stop(await this.#write(obj, draft, {}));
    }
    const machine = await this.#d.kube.get<Obj>({
      apiVersion: ref.apiVersion,
      kind: "Machine",
      namespace,
      name: ref.name,
    });
    if (!machine || machine.metadata.uid !== ref.uid || machine.metadata.deletionTimestamp) {
      return new Stop(await this.#finalize(obj, draft, `Machine ${ref.name} is deleted`));
    }
    if (!isDnsLabel(namespace) || !isDnsLabel(ref.name)) {
      const msg = `the machine id ${namespace}/${ref.name} is not two DNS-1123 labels (bootseal's machine id rule)`;
      draft.set(cond("InnerConfigReady", "False", "InvalidMachineName", msg));
      draft.set(cond("Ready", "False", "InvalidMachineName", msg));
      return new Stop(await this.#write(obj, draft, {}));
    }
    const machineKey = `${namespace}/${ref.name}`;
    this.machines.set(machineKey, `${namespace}/${name}`);
    return { obj, draft, machine, cluster, id: { namespace, name: ref.name }, machineKey };
  }

  /** The finalizer and the machine id first: from here on the service may hold a config. */
  async #claim({ obj, machineKey }: Owned): Promise<void> {
    const { namespace, name } = obj.metadata;
    const annotations = obj.metadata.annotations ?? {};
    if (
      (obj.metadata.finalizers ?? []).includes(FINALIZER) &&
      annotations[ANNOTATION_MACHINE] === machineKey
    ) {
      return;
    }
    const patched = await this.#d.kube.mergePatch<Obj>(
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

  /** The spec, valid, and the cluster the Machine belongs to. */
  async #spec(owned: Owned): Promise<Configured | Stop> {
    const { obj, draft, machine } = owned;
    let spec: BootsealConfigSpec;
    try {
      spec = validateSpec(obj.spec);
    } catch (err) {
      const msg = isBootsealError(err) ? err.message : "the spec is not valid";
      draft.set(cond("InnerConfigReady", "False", "InvalidSpec", msg));
      draft.set(cond("Ready", "False", "InvalidSpec", msg));
      return new Stop(await this.#write(obj, draft, {}));
    }
    const clusterName =
      ((machine.spec as { clusterName?: unknown } | undefined)?.clusterName as string | undefined) ??
      machine.metadata.labels?.[CLUSTER_NAME_LABEL] ??
      obj.metadata.labels?.[CLUSTER_NAME_LABEL] ??
      "";
    return { ...owned, spec, clusterName };
  }

  /**
   * The inner config (created once, reconciled by its own provider) and the bytes of its data
   * secret, once there and of the payload kind the spec names.
   */
  async #innerData(c: Configured): Promise<InnerData | Stop> {
    const { obj, draft, spec } = c;
    const { namespace, name } = obj.metadata;
    const inner = await this.#ensureInner(obj, c.machine, spec, c.clusterName, draft);
    if (!inner) return new Stop(await this.#write(obj, draft, { requeueAfterMs: this.#d.waitMs }));
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
    if (!innerSecret || !innerCreated) {
      await this.#nudge(inner, c.cluster);
      return this.#waitForInner(obj, draft, `${spec.inner.kind} ${innerName(name)} has no data secret yet`);
    }
    const secret = await this.#d.kube.get<Obj & { data?: Record<string, string> }>({
      apiVersion: "v1",
      kind: "Secret",
      namespace,
      name: innerSecret,
    });
    if (secret && !writtenBy(inner, secret)) {
      // Never publish what bootseal wrote (the stub) as the machine's bootstrap data.
      const what = `${spec.inner.kind} ${innerName(name)} names Secret ${innerSecret}, which its provider did not write`;
      if (obj.metadata.annotations?.[ANNOTATION_PUBLISHED_VERSION] === undefined)
        return this.#waitForInner(obj, draft, `${what}: waiting for its own data secret`);
      draft.set(
        cond("InnerConfigReady", "True", "DataSecretRestored", `${what} (restored): published config kept`),
      );
      return "kept";
    }
    const b64 = secret?.data?.value;
    if (!b64)
      return this.#waitForInner(
        obj,
        draft,
        `the data secret ${innerSecret} of ${spec.inner.kind} ${innerName(name)} has no value yet`,
      );
    const data = new Uint8Array(Buffer.from(b64, "base64"));
    const mismatch = payloadMismatch(spec.payload, data);
    if (mismatch) {
      draft.set(
        cond("InnerConfigReady", "False", "PayloadMismatch", `spec.payload is ${spec.payload}: ${mismatch}`),
      );
      draft.set(cond("Ready", "False", "PayloadMismatch", mismatch));
      return new Stop(await this.#write(obj, draft, {}));
    }
    draft.set(
      cond("InnerConfigReady", "True", "DataSecretAvailable", `${spec.inner.kind} ${innerName(name)}`),
    );
    return data;
  }

  /** The inner config has no data yet: look again after waitMs. */
  async #waitForInner(obj: Obj, draft: StatusDraft, message: string): Promise<Stop> {
    draft.set(cond("InnerConfigReady", "False", "WaitingForDataSecret", message));
    if (draft.value.dataSecretName === undefined) {
      draft.set(cond("DataSecretAvailable", "False", "WaitingForInnerConfig", message));
      draft.set(cond("Ready", "False", "WaitingForInnerConfig", message));
    }
    return new Stop(await this.#write(obj, draft, { requeueAfterMs: this.#d.waitMs }));
  }

  /** Publish only what the service does not hold yet (and nothing once the config is deleted). */
  async #publish(c: Configured, data: InnerData): Promise<Publication | Stop> {
    const { obj, draft } = c;
    const { namespace, name } = obj.metadata;
    const configDeleted = obj.metadata.annotations?.[ANNOTATION_CONFIG_DELETED] === "true";
    let version = obj.metadata.annotations?.[ANNOTATION_PUBLISHED_VERSION];
    let tpm: TpmSeal | undefined;
    if (c.spec.tpm && data !== "kept" && !configDeleted) {
      const found = await this.#tpmSeal(c, c.spec.tpm);
      if (found instanceof Stop) return found;
      tpm = found;
    }
    const digest = data === "kept" ? undefined : publishedDigest(data, tpm);
    if (
      data !== "kept" &&
      obj.metadata.annotations?.[ANNOTATION_PUBLISHED_SHA256] !== digest &&
      !configDeleted
    ) {
      let published: { version: number };
      try {
        published = await this.#d.service.publish(
          c.id,
          data,
          c.spec.bootstrapCommand,
          { cluster: c.clusterName || undefined, machine: c.id.name, bootsealConfig: name },
          tpm,
        );
      } catch (err) {
        return new Stop(await this.#serviceDown(obj, draft, err, "publish"));
      }
      version = String(published.version);
      const patched = await this.#d.kube.mergePatch<Obj>(
        { apiVersion: API_VERSION, kind: KIND, namespace, name },
        {
          metadata: {
            annotations: {
              [ANNOTATION_PUBLISHED_SHA256]: digest as string,
              [ANNOTATION_PUBLISHED_VERSION]: version,
            },
          },
        },
      );
      obj.metadata = patched.metadata;
      this.#d.log.info(
        { machine: c.machineKey, version: published.version },
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
    return { version, configDeleted };
  }

  /**
   * The machine's EK for `spec.tpm` (tpm-ek.ts), or the reconcile stops: waiting while no source
   * has one yet (an inventory annotates the Machine, or the infrastructure reports it), and
   * InvalidTpmEk for one that is not a public key.
   */
  async #tpmSeal(c: Configured, spec: TpmSealSpec): Promise<TpmSeal | Stop> {
    const { obj, draft } = c;
    try {
      const infra = spec.ekFieldPath !== undefined ? await this.#infrastructureOf(c.machine) : null;
      const seal = tpmSealOf(spec, c.machine, infra);
      if (seal) return seal;
    } catch (err) {
      if (!isBootsealError(err) || err.code !== "BAD_INPUT") throw err;
      draft.set(cond("Published", "False", "InvalidTpmEk", err.message));
      draft.set(cond("Ready", "False", "InvalidTpmEk", err.message));
      return new Stop(await this.#write(obj, draft, { requeueAfterMs: this.#d.waitMs }));
    }
    const message = `spec.tpm: waiting for the machine's TPM EK (${ekSources(spec)})`;
    draft.set(cond("Published", "False", "WaitingForTpmEk", message));
    if (draft.value.dataSecretName === undefined)
      draft.set(cond("Ready", "False", "WaitingForTpmEk", message));
    return new Stop(await this.#write(obj, draft, { requeueAfterMs: this.#d.waitMs }));
  }

  /** The Machine's infrastructure object (v1beta2 names its group only), or null while there is none. */
  async #infrastructureOf(machine: Obj): Promise<Obj | null> {
    const ref = (machine.spec as { infrastructureRef?: Record<string, unknown> } | undefined)
      ?.infrastructureRef;
    const kind = ref?.kind;
    const name = ref?.name;
    if (typeof kind !== "string" || typeof name !== "string") return null;
    const apiVersion =
      typeof ref?.apiVersion === "string"
        ? ref.apiVersion
        : typeof ref?.apiGroup === "string"
          ? await this.#d.kube.preferredVersion(ref.apiGroup)
          : null;
    if (apiVersion === null) return null;
    return this.#d.kube.get<Obj>({ apiVersion, kind, namespace: machine.metadata.namespace, name });
  }

  /** The data secret with the stub, once per published version. */
  async #dataSecret(c: Configured, { version, configDeleted }: Publication): Promise<Stop | undefined> {
    const { obj, draft } = c;
    const { namespace, name } = obj.metadata;
    const ownName = dataSecretName(name);
    const own = await this.#d.kube.get<Obj>({ apiVersion: "v1", kind: "Secret", namespace, name: ownName });
    if (!configDeleted && (!own || own.metadata.annotations?.[ANNOTATION_PUBLISHED_VERSION] !== version)) {
      let stub: Uint8Array;
      try {
        stub = await this.#d.service.userdata(c.id, c.spec.userDataFormat, c.spec.skipModules);
      } catch (err) {
        return new Stop(await this.#serviceDown(obj, draft, err, "userdata"));
      }
      await this.#writeDataSecret(obj, own, ownName, c.clusterName, c.spec, stub, version as string);
      this.#d.log.info({ machine: c.machineKey, secret: ownName, version }, "wrote the data secret");
    }
    if (own || !configDeleted) {
      draft.field("dataSecretName", ownName);
      draft.field("initialization", { ...(draft.value.initialization as object), dataSecretCreated: true });
      draft.field("ready", true);
      draft.set(cond("DataSecretAvailable", "True", "DataSecretAvailable", `Secret ${ownName}`));
    }
    return undefined;
  }

  /** The machine's phase at the service: status.phase and MachineBootstrapped. */
  async #phase({ obj, draft, id }: Configured): Promise<string | undefined | Stop> {
    let phase: string | undefined = draft.value.phase as string | undefined;
    try {
      const status = await this.#d.service.status(id);
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
      return new Stop(
        await this.#write(obj, draft, { failed: { reason: f.reason, ...retryAfter(f.retryAfterMs) } }),
      );
    }
    return phase;
  }

  /** The node registered: the config has done its job (spec.deleteConfigOnNodeRef). */
  async #nodeRef(c: Configured, { configDeleted }: Publication): Promise<Stop | undefined> {
    const { obj, draft } = c;
    const { namespace, name } = obj.metadata;
    const nodeRef = (c.machine.status as { nodeRef?: { name?: string } } | undefined)?.nodeRef?.name;
    if (!c.spec.deleteConfigOnNodeRef || !nodeRef || configDeleted) return undefined;
    try {
      await this.#d.service.deleteConfig(c.id);
    } catch (err) {
      return new Stop(await this.#serviceDown(obj, draft, err, "delete"));
    }
    const patched = await this.#d.kube.mergePatch<Obj>(
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
      { machine: c.machineKey, node: nodeRef },
      "deleted the config: the Machine has its nodeRef",
    );
    return undefined;
  }

  /**
   * Tells the inner config's provider that its Cluster changed: the kubeadm provider maps Cluster
   * events only to configs a Machine names, so a wrapped config would wait for its resync (ten
   * minutes) after the infrastructure or the control plane becomes ready. Any change of the
   * config is an event for it; this one is written once per Cluster state.
   */
  async #nudge(inner: Obj, cluster: Obj | null): Promise<void> {
    if (!cluster) return;
    const state = clusterState(cluster);
    if (inner.metadata.annotations?.[ANNOTATION_CLUSTER_STATE] === state) return;
    await this.#d.kube.mergePatch(
      {
        apiVersion: inner.apiVersion as string,
        kind: inner.kind as string,
        namespace: inner.metadata.namespace,
        name: inner.metadata.name,
      },
      { metadata: { annotations: { [ANNOTATION_CLUSTER_STATE]: state } } },
    );
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
      const created = await kube.create<Obj>(
        innerConfigBody(obj, machine, ref, clusterName, innerSpec ?? {}),
      );
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
    const format = SECRET_FORMAT[spec.userDataFormat];
    const body = stubSecretBody(obj, ownName, clusterName, format, stub, version, own);
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
