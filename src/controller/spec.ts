/**
 * The BootsealConfig API (bootstrap.bootseal.dev/v1alpha1): names, labels, annotations and
 * the spec check. Pure: no Kubernetes call, so the rules are unit tested on their own. The
 * CRD schemas (deploy/helm/bootseal/crds/) say the same things to the API server; this is
 * what the controller relies on even when an old CRD let something through.
 */
import { BootsealError } from "../errors.ts";

export const GROUP = "bootstrap.bootseal.dev";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = "BootsealConfig";
export const PLURAL = "bootsealconfigs";
export const TEMPLATE_KIND = "BootsealConfigTemplate";
export const TEMPLATE_PLURAL = "bootsealconfigtemplates";
export const FINALIZER = "bootstrap.bootseal.dev/config";

/** sha256 (hex) of the inner data secret's `value` the service holds for this config. */
export const ANNOTATION_PUBLISHED_SHA256 = "bootstrap.bootseal.dev/published-sha256";
/** The service's publish counter of that publish (its `version`). */
export const ANNOTATION_PUBLISHED_VERSION = "bootstrap.bootseal.dev/published-version";
/** The machine id at the service (`<ns>/<machine>`), kept so cleanup works without the Machine. */
export const ANNOTATION_MACHINE = "bootstrap.bootseal.dev/machine";
/** Set once the config was deleted at the service because the Machine has its nodeRef. */
export const ANNOTATION_CONFIG_DELETED = "bootstrap.bootseal.dev/config-deleted";

/**
 * On the inner config: the owning Cluster's state the inner provider last saw from bootseal
 * (infrastructure provisioned, control plane initialised, paused). The kubeadm provider maps a
 * Cluster's events only to configs a Machine names, never to a wrapped one: changing this
 * annotation is what wakes it when the Cluster becomes ready.
 */
export const ANNOTATION_CLUSTER_STATE = "bootstrap.bootseal.dev/cluster-state";
/**
 * On the Machine: its TPM's endorsement key (PEM, or SubjectPublicKeyInfo as base64 DER), as an
 * inventory or a cloud API gives it; a BootsealConfig with `spec.tpm` seals the config to it.
 */
export const ANNOTATION_TPM_EK = "bootstrap.bootseal.dev/tpm-ek";
/** On bootseal's own data secret (the stub): never taken for inner bootstrap data. */
export const LABEL_STUB_SECRET = "bootstrap.bootseal.dev/stub";

/** Cluster API's names (sigs.k8s.io/cluster-api v1.14.2, api/core/v1beta2). */
export const CAPI_GROUP = "cluster.x-k8s.io";
export const CAPI_VERSION = "v1beta2";
export const CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name";
export const CLUSTER_SECRET_TYPE = "cluster.x-k8s.io/secret";
/** Cluster API's pause: on any object, or `spec.paused` on its Cluster (clusterctl move sets both). */
export const PAUSED_ANNOTATION = "cluster.x-k8s.io/paused";
/** Cluster API's --watch-filter label: the inner config carries the BootsealConfig's, so its provider sees it. */
export const WATCH_FILTER_LABEL = "cluster.x-k8s.io/watch-filter";

export const USER_DATA_FORMATS = ["cloud-init", "ignition", "powershell"] as const;
export type UserDataFormat = (typeof USER_DATA_FORMATS)[number];
export const PAYLOADS = ["cloud-config", "ignition", "manifest", "raw"] as const;
export type Payload = (typeof PAYLOADS)[number];

/** The data secret's `format` key (Cluster API's bootstrap data formats, plus powershell). */
export const SECRET_FORMAT: Record<UserDataFormat, string> = {
  "cloud-init": "cloud-config",
  ignition: "ignition",
  powershell: "powershell",
};

export interface InnerSpec {
  readonly apiVersion: string;
  readonly kind: string;
  readonly spec?: Record<string, unknown>;
  readonly templateRef?: { readonly name: string };
}

/** `spec.tpm`: seal the config to the machine's TPM (the service's rule has `tpm_ek: publish`). */
export interface TpmSealSpec {
  /** Where on the Machine's infrastructure object the EK is (dotted, e.g. `status.tpm.ekPublic`). */
  readonly ekFieldPath?: string;
  /** The PCR policy (sha256 bank, PCR number to hex value); none: the service rule's. */
  readonly pcrs?: Readonly<Record<string, string>>;
}

/** A BootsealConfig spec with its defaults applied. */
export interface BootsealConfigSpec {
  readonly inner: InnerSpec;
  readonly userDataFormat: UserDataFormat;
  readonly payload?: Payload;
  readonly bootstrapCommand?: string;
  /** cloud-config modules the machine's fetch skips (the stub's `--skip-module`). */
  readonly skipModules: readonly string[];
  readonly deleteConfigOnNodeRef: boolean;
  readonly tpm?: TpmSealSpec;
}

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const API_VERSION_RE = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/v[0-9a-z]+$/;
const KIND_RE = /^[A-Z][A-Za-z0-9]{0,62}$/;

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `spec.${message}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Checks a spec as the API server handed it over and applies the defaults. */
export function validateSpec(raw: unknown): BootsealConfigSpec {
  if (!isObject(raw)) throw new BootsealError("BAD_INPUT", "spec is missing");
  const inner = raw.inner;
  if (!isObject(inner)) throw bad("inner is missing");
  const { apiVersion, kind } = inner;
  if (typeof apiVersion !== "string" || !API_VERSION_RE.test(apiVersion))
    throw bad("inner.apiVersion must be GROUP/VERSION (e.g. bootstrap.cluster.x-k8s.io/v1beta2)");
  if (typeof kind !== "string" || !KIND_RE.test(kind)) throw bad("inner.kind must be a Kind name");
  if (apiVersion.startsWith(`${GROUP}/`)) throw bad("inner cannot be a BootsealConfig (no nesting)");
  const hasSpec = inner.spec !== undefined;
  const hasRef = inner.templateRef !== undefined;
  if (hasSpec === hasRef) throw bad("inner needs exactly one of spec and templateRef");
  let out: InnerSpec;
  if (hasSpec) {
    if (!isObject(inner.spec)) throw bad("inner.spec must be an object");
    out = { apiVersion, kind, spec: inner.spec };
  } else {
    const ref = inner.templateRef;
    if (!isObject(ref) || typeof ref.name !== "string" || !NAME.test(ref.name))
      throw bad("inner.templateRef.name must be the name of a template in the same namespace");
    out = { apiVersion, kind, templateRef: { name: ref.name } };
  }
  const format = raw.userDataFormat ?? "cloud-init";
  if (!(USER_DATA_FORMATS as readonly unknown[]).includes(format))
    throw bad(`userDataFormat must be one of ${USER_DATA_FORMATS.join(", ")}`);
  const payload = raw.payload;
  if (payload !== undefined && !(PAYLOADS as readonly unknown[]).includes(payload))
    throw bad(`payload must be one of ${PAYLOADS.join(", ")}`);
  const command = raw.bootstrapCommand;
  if (command !== undefined) {
    // The service's own rule (docs/userdata.md): printable UTF-8, at most 4096 bytes.
    if (typeof command !== "string") throw bad("bootstrapCommand must be a string");
    if (Buffer.byteLength(command) > 4096) throw bad("bootstrapCommand is longer than 4096 bytes");
    if (/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u.test(command))
      throw bad("bootstrapCommand must be printable (no control or line-separator characters)");
  }
  const skip = raw.skipModules ?? [];
  if (!Array.isArray(skip) || skip.length > 16)
    throw bad("skipModules must be a list of at most 16 module names");
  for (const name of skip as unknown[])
    if (typeof name !== "string" || !/^[a-z][a-z_]{0,31}$/.test(name))
      throw bad("skipModules: a module name is lower-case letters and '_' (e.g. ntp, users_groups)");
  const del = raw.deleteConfigOnNodeRef ?? true;
  if (typeof del !== "boolean") throw bad("deleteConfigOnNodeRef must be true or false");
  const tpm = raw.tpm === undefined ? undefined : tpmSpec(raw.tpm);
  return {
    inner: out,
    userDataFormat: format as UserDataFormat,
    ...(payload !== undefined ? { payload: payload as Payload } : {}),
    ...(command !== undefined && command !== "" ? { bootstrapCommand: command } : {}),
    skipModules: skip as string[],
    deleteConfigOnNodeRef: del,
    ...(tpm ? { tpm } : {}),
  };
}

export const EK_FIELD_PATH = /^[A-Za-z][A-Za-z0-9]{0,62}(\.[A-Za-z][A-Za-z0-9]{0,62}){0,7}$/;

function tpmSpec(raw: unknown): TpmSealSpec {
  if (!isObject(raw)) throw bad("tpm must be an object");
  const path = raw.ekFieldPath;
  if (path !== undefined && (typeof path !== "string" || !EK_FIELD_PATH.test(path)))
    throw bad("tpm.ekFieldPath must be a dotted field path (e.g. status.tpm.ekPublic)");
  const pcrs = raw.pcrs;
  if (pcrs !== undefined) {
    if (!isObject(pcrs) || Object.keys(pcrs).length === 0 || Object.keys(pcrs).length > 24)
      throw bad("tpm.pcrs must map 1 to 24 PCR numbers to values");
    for (const [index, value] of Object.entries(pcrs)) {
      if (!/^(1?[0-9]|2[0-3])$/.test(index))
        throw bad(`tpm.pcrs: ${index.slice(0, 8)} is not a PCR number 0-23`);
      if (typeof value !== "string" || !/^[0-9a-fA-F]{64}$/.test(value))
        throw bad(`tpm.pcrs.${index} must be a sha256 value in hex (64 digits)`);
    }
  }
  return {
    ...(path !== undefined ? { ekFieldPath: path as string } : {}),
    ...(pcrs !== undefined ? { pcrs: pcrs as Record<string, string> } : {}),
  };
}

/**
 * Whether the inner data looks like the payload kind the spec names (the fetcher detects the
 * kind itself; this catches a spec that says `ignition` over a cloud-config). null: it does.
 */
export function payloadMismatch(payload: Payload | undefined, data: Uint8Array): string | null {
  if (payload === undefined || payload === "raw") return null;
  const text = new TextDecoder().decode(data.subarray(0, 65536));
  if (payload === "cloud-config") {
    const ok = /^\s*(## template: jinja\s*\n\s*)?#cloud-config/i.test(text);
    return ok ? null : "the inner data does not start with #cloud-config";
  }
  if (payload === "ignition") {
    try {
      const doc = JSON.parse(new TextDecoder().decode(data)) as { ignition?: { version?: unknown } };
      // Spec 2.x too: the kubeadm provider emits 2.3.0 for Flatcar; the fetcher translates it.
      if (typeof doc?.ignition?.version === "string" && /^[23]\./.test(doc.ignition.version)) return null;
    } catch {
      // falls through
    }
    return "the inner data is not an Ignition config (spec 2.x or 3.x)";
  }
  return null;
}

/** `<name>-inner`, `<name>-bootseal`: the objects a BootsealConfig owns. */
export function innerName(name: string): string {
  return `${name}-inner`;
}
export function dataSecretName(name: string): string {
  return `${name}-bootseal`;
}
