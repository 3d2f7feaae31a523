/**
 * metav1.Condition lists, as Kubernetes keeps them: one entry per type, lastTransitionTime
 * moves only when the status changes, observedGeneration says which spec it speaks for.
 */
export type ConditionStatus = "True" | "False" | "Unknown";

export interface Condition {
  readonly type: string;
  readonly status: ConditionStatus;
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime: string;
  readonly observedGeneration?: number;
}

export type ConditionInput = Omit<Condition, "lastTransitionTime" | "observedGeneration">;

/** The condition types a BootsealConfig carries, in the order they are listed. */
export const CONDITION_TYPES = [
  "Ready",
  "DataSecretAvailable",
  "InnerConfigReady",
  "Published",
  "MachineBootstrapped",
] as const;

/** A reason is CamelCase (metav1.Condition's rule: `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`). */
export const REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;

/** Sets one condition; the list is returned anew (the old one is not changed). */
export function setCondition(
  list: readonly Condition[] | undefined,
  input: ConditionInput,
  generation: number | undefined,
  now: Date,
): Condition[] {
  const old = (list ?? []).find((c) => c.type === input.type);
  const next: Condition = {
    type: input.type,
    status: input.status,
    reason: REASON.test(input.reason) ? input.reason : "Unknown",
    // The API server refuses a message over 32768 characters.
    message: input.message.slice(0, 32_000),
    lastTransitionTime:
      old && old.status === input.status ? old.lastTransitionTime : now.toISOString().replace(/\.\d+Z$/, "Z"),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  const rest = (list ?? []).filter((c) => c.type !== input.type);
  const all = [...rest, next];
  const rank = (t: string) => {
    const i = (CONDITION_TYPES as readonly string[]).indexOf(t);
    return i === -1 ? CONDITION_TYPES.length : i;
  };
  return all.sort((a, b) => rank(a.type) - rank(b.type) || a.type.localeCompare(b.type));
}
