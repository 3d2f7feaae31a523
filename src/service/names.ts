/**
 * Machine names: namespace and name are Kubernetes DNS-1123 labels. They are checked by the
 * route schemas before a handler (and so before any store access) runs; the same pattern is
 * used here for values that do not come through a schema (tokens, store listings).
 */
export const DNS_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
const DNS_LABEL = new RegExp(DNS_LABEL_PATTERN);
export const DNS_LABEL_MAX = 63;

export function isDnsLabel(text: string): boolean {
  return text.length <= DNS_LABEL_MAX && DNS_LABEL.test(text);
}

export interface MachineRef {
  readonly namespace: string;
  readonly name: string;
}

/** "<ns>/<name>": the machine id in the audit log, the KMS encryption context and events. */
export function machineId(m: MachineRef): string {
  return `${m.namespace}/${m.name}`;
}
