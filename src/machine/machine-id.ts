/**
 * A machine's identity: a namespace and a name, both Kubernetes DNS-1123 labels (design.md),
 * written `<ns>/<name>` wherever it is one string (audit log, events, the KMS encryption
 * context, the CLI's --machine, an EncryptedConfig's bound id). Labels cannot hold a `/` or a
 * `.`, so both that text form and a bootstrap token (`bst.<ns>.<name>.<secret>`) split
 * unambiguously.
 */
import { BootsealError } from "../errors.ts";

export interface MachineId {
  readonly namespace: string;
  readonly name: string;
}

/**
 * The label rule. The same text as the envelope's own copy
 * (src/envelope/encrypted-config/document.ts), which the format keeps for itself because the
 * envelope layer imports nothing above it. The length bound (63) is in the pattern, so the
 * pattern alone is the rule; DNS_LABEL_MAX is there for schemas that state it separately.
 */
export const DNS_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$";
export const DNS_LABEL_MAX = 63;
const DNS_LABEL = new RegExp(DNS_LABEL_PATTERN);

export function isDnsLabel(text: string): boolean {
  return DNS_LABEL.test(text);
}

/** `<ns>/<name>`. */
export function formatMachineId(m: MachineId): string {
  return `${m.namespace}/${m.name}`;
}

/** `<ns>/<name>` to a machine; null unless it is exactly two DNS-1123 labels. */
export function machineIdFrom(text: string): MachineId | null {
  const parts = text.split("/");
  if (parts.length !== 2) return null;
  const [namespace, name] = parts as [string, string];
  return isDnsLabel(namespace) && isDnsLabel(name) ? { namespace, name } : null;
}

/** `<ns>/<name>` given on a command line or in a URL; USAGE naming `where` when it is not one. */
export function parseMachineId(text: string, where = "--machine"): MachineId {
  const machine = machineIdFrom(text);
  if (!machine) {
    throw new BootsealError("USAGE", `${where} wants NAMESPACE/NAME (DNS-1123 labels), got "${text}"`);
  }
  return machine;
}

export function sameMachine(a: MachineId, b: MachineId): boolean {
  return a.namespace === b.namespace && a.name === b.name;
}
