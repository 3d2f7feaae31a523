/**
 * The BootsealConfig status one reconcile builds up step by step: conditions and fields over a
 * copy of the stored status, written once at the end, and only when it differs.
 */
import { type Condition, type ConditionInput, type ConditionStatus, setCondition } from "./conditions.ts";

export class StatusDraft {
  readonly #old: Record<string, unknown>;
  readonly #next: Record<string, unknown>;
  readonly #gen: number | undefined;
  readonly #now: Date;

  constructor(obj: { metadata: { generation?: number }; status?: Record<string, unknown> }, now: Date) {
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

export function cond(type: string, status: ConditionStatus, reason: string, message = ""): ConditionInput {
  return { type, status, reason, message };
}
