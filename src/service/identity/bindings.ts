/**
 * Which machines a proven cloud identity may act for: the `machineAuth.bindings` of the
 * service configuration (src/config/machine-auth.ts). A binding names a method, attributes
 * that must all match (an exact value or a `*` glob), and the machines (`ns/name`, `ns/*`).
 * An identity may act for a machine when any binding of its method matches it and covers the
 * machine. No binding, no machine: the default is to refuse.
 *
 * AWS: an `arn` given as an IAM role ARN (`arn:aws:iam::ACCOUNT:role/[PATH/]NAME`) matches
 * that role's sessions (`arn:aws:sts::ACCOUNT:assumed-role/NAME/*`): STS names an assumed
 * role without its path, and role names are unique within an account whatever their path.
 */
import type { MachineBinding, MachinePattern } from "../../config/machine-auth.ts";
import type { CloudAuthMethod } from "../../machine/identity-login.ts";
import type { MachineId } from "../../machine/machine-id.ts";
import type { ProvenIdentity } from "./verifier.ts";

/** An EC2 instance id, as an instance profile's session name carries it. */
const INSTANCE_ID = /^i-[0-9a-f]{8,17}$/;

/** `*` matches any run of characters (none included); everything else is literal. */
export function globMatches(pattern: string, value: string): boolean {
  if (!pattern.includes("*")) return pattern === value;
  const source = pattern
    .split("*")
    .map((part) => part.replace(/[.+?^${}()|[\]\\/]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${source}$`, "s").test(value);
}

const ROLE_ARN = /^arn:([^:]+):iam::([^:]+):role\/(?:.*\/)?([^/]+)$/;

function attributeMatches(
  method: CloudAuthMethod,
  key: string,
  pattern: string,
  attributes: Readonly<Record<string, string>>,
): boolean {
  const value = attributes[key];
  if (value === undefined) return false;
  if (method === "aws-iam" && key === "arn") {
    const role = ROLE_ARN.exec(pattern);
    if (role) return globMatches(`arn:${role[1]}:sts::${role[2]}:assumed-role/${role[3]}/*`, value);
  }
  return globMatches(pattern, value);
}

function covers(pattern: MachinePattern, m: MachineId): boolean {
  return pattern.namespace === m.namespace && (pattern.name === null || pattern.name === m.name);
}

/** True when the binding matches the identity's attributes (its method's, all of them). */
export function bindingMatches(binding: MachineBinding, identity: ProvenIdentity): boolean {
  if (binding.method !== identity.method) return false;
  return Object.entries(binding.match).every(([key, pattern]) =>
    attributeMatches(binding.method, key, pattern, identity.attributes),
  );
}

/** True when the binding lets a matching identity act for this machine. */
function bindingAllows(binding: MachineBinding, identity: ProvenIdentity, m: MachineId): boolean {
  if (!binding.machines.some((p) => covers(p, m))) return false;
  if (!binding.instanceIdFromSession) return true;
  const session = identity.attributes.session;
  return session !== undefined && INSTANCE_ID.test(session) && session === m.name;
}

/** The first binding that lets this identity act for this machine, or null. */
export function allowedBinding(
  bindings: readonly MachineBinding[],
  identity: ProvenIdentity,
  m: MachineId,
): MachineBinding | null {
  return bindings.find((b) => bindingMatches(b, identity) && bindingAllows(b, identity, m)) ?? null;
}

/**
 * The cloud identity a machine logs in with, when a binding covers it: the user-data stub
 * for such a machine carries no token, only this method. The first covering binding decides
 * (the configuration's order); null: the machine uses a bootstrap token.
 */
export function machineAuthFor(bindings: readonly MachineBinding[], m: MachineId): CloudAuthMethod | null {
  return bindings.find((b) => b.machines.some((p) => covers(p, m)))?.method ?? null;
}
