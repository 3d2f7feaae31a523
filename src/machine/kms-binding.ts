/**
 * The `bootseal-machine` binding (design principle 3): every AWS KMS key a machine's document
 * is wrapped to carries the encryption context {"bootseal-machine": "<ns>/<name>"}, so a
 * machine's IAM policy can allow kms:Decrypt for its own context only. The service binds a
 * creation rule's keys when it publishes, `bootseal rotate --store` binds keys it adds to a
 * `configs/<ns>/<name>` object, and the fetcher refuses a document bound to another machine
 * before any key service is called (AWS enforces the same through the policy; checking here
 * fails closed where the policy is looser than it should be, and on emulators).
 */
import type { KeyEntry } from "../envelope/sops/master-key.ts";
import { BootsealError } from "../errors.ts";
import { formatMachineId, type MachineId } from "./machine-id.ts";

export const MACHINE_CONTEXT_KEY = "bootseal-machine";

type Context = Readonly<Record<string, string>>;

/** An encryption context with the machine's binding merged in (it wins over a same-named key). */
export function bindContext(
  context: Context | undefined,
  machine: MachineId | string,
): Record<string, string> {
  const id = typeof machine === "string" ? machine : formatMachineId(machine);
  return { ...context, [MACHINE_CONTEXT_KEY]: id };
}

/** Key groups with every AWS KMS entry bound to the machine; other kinds are kept as they are. */
export function bindKeyGroups(groups: readonly (readonly KeyEntry[])[], machine: MachineId): KeyEntry[][] {
  return groups.map((group) =>
    group.map((entry) => {
      if (entry.kind !== "kms") return entry;
      const fields = new Map(entry.fields);
      const context = fields.get("context");
      fields.set("context", bindContext(typeof context === "object" ? context : undefined, machine));
      return { ...entry, fields };
    }),
  );
}

/**
 * Refuses (FORBIDDEN) a document whose AWS KMS entry is bound to another machine; a document
 * with no binding, or checked without knowing the machine (null), passes.
 */
export function checkMachineBinding(
  metadata: { readonly keyGroups: readonly (readonly KeyEntry[])[] },
  machine: string | null,
): void {
  if (machine === null) return;
  for (const group of metadata.keyGroups) {
    for (const entry of group) {
      if (entry.kind !== "kms") continue;
      const context = entry.fields.get("context");
      if (typeof context !== "object" || context === null) continue;
      const bound = (context as Context)[MACHINE_CONTEXT_KEY];
      if (bound !== undefined && bound !== machine) {
        throw new BootsealError(
          "FORBIDDEN",
          `the document is bound to machine ${JSON.stringify(bound)} (KMS encryption context), this is ${machine}`,
        );
      }
    }
  }
}
