/**
 * The store layout (design.md): every object the service keeps about a machine, under one
 * object store (and optional key prefix):
 *
 *   configs/<ns>/<name>         the encrypted document
 *   tokens/<ns>/<name>.json     bootstrap token record (SHA-256, expiry, uses left)
 *   status/<ns>/<name>.json     current phase, publish counter and history
 *
 * The service writes it, the fetcher reads a config straight from the store with its own
 * cloud credentials, and `bootseal rotate --store` walks `configs/`; all three name keys here.
 */
import { type MachineId, machineIdFrom } from "./machine-id.ts";

export const CONFIGS_PREFIX = "configs/";
const TOKENS_PREFIX = "tokens/";
const STATUS_PREFIX = "status/";

/** A key the layout never uses for a machine: a head of it is a cheap read-access probe. */
export const READINESS_PROBE_KEY = `${STATUS_PREFIX}.readyz`;

/** Where `POST /v1/check` writes, reads back and deletes its probe (never a machine's key). */
export const writeProbeKey = (nonce: string): string => `${STATUS_PREFIX}.check-${nonce}`;

export const configKey = (m: MachineId): string => `${CONFIGS_PREFIX}${m.namespace}/${m.name}`;
export const tokenKey = (m: MachineId): string => `${TOKENS_PREFIX}${m.namespace}/${m.name}.json`;
export const statusKey = (m: MachineId): string => `${STATUS_PREFIX}${m.namespace}/${m.name}.json`;

/** The listing prefix of the status records of one namespace, or of every machine. */
export function statusPrefix(namespace?: string): string {
  return namespace ? `${STATUS_PREFIX}${namespace}/` : STATUS_PREFIX;
}

const STATUS_KEY = /^status\/([^/]+)\/([^/]+)\.json$/;
const CONFIG_KEY = /^configs\/([^/]+)\/([^/]+)$/;
const NESTED_CONFIG_KEY = /(?:^|\/)configs\/([^/]+)\/([^/]+)$/;

/** `status/<ns>/<name>.json` to its machine; null for anything else (e.g. the probe key). */
export function machineFromStatusKey(key: string): MachineId | null {
  const m = STATUS_KEY.exec(key);
  return m ? machineIdFrom(`${m[1]}/${m[2]}`) : null;
}

/**
 * The `<ns>/<name>` text of a config key, NOT checked as labels (callers decide: the fetcher
 * refuses a bad one, rotate binds what the key says); null when the key is not laid out so.
 * `nested`: the layout may sit below more path (a store URL's prefix, a file tree), as in
 * `s3://bucket/site-a/configs/<ns>/<name>`.
 */
export function configKeyMachineText(key: string, nested = false): string | null {
  const m = (nested ? NESTED_CONFIG_KEY : CONFIG_KEY).exec(key);
  return m ? `${m[1]}/${m[2]}` : null;
}
