/**
 * The machine's bootseal phase (GET /v1/machines/:ns/:name/status) as the BootsealConfig's
 * `status.phase` and its MachineBootstrapped condition. Pure.
 */
import { PHASES, type Phase } from "../machine/status-protocol.ts";
import type { ConditionInput } from "./conditions.ts";

export interface StatusEntry {
  readonly phase: string;
  readonly message?: string;
  readonly exitCode?: number;
  readonly attempt?: number;
  readonly by?: string;
}

/** The part of the service's status record the mapping reads. */
export interface MachineStatus {
  readonly phase: string;
  readonly version?: number;
  readonly updatedAt?: string;
  readonly history?: readonly StatusEntry[];
}

function camel(phase: string): string {
  return phase.charAt(0).toUpperCase() + phase.slice(1);
}

/** The newest history entry of the current phase (where the message and exit code are). */
function latestOf(status: MachineStatus): StatusEntry | undefined {
  const h = status.history ?? [];
  for (let i = h.length - 1; i >= 0; i--) if (h[i]?.phase === status.phase) return h[i];
  return undefined;
}

/** The printable part of a machine's message (it is the machine's text: kept short). */
function clean(text: string | undefined): string {
  return (text ?? "")
    .replace(/[\p{Cc}\p{Cf}]+/gu, " ")
    .trim()
    .slice(0, 1024);
}

export interface PhaseView {
  /** status.phase; undefined when the phase is none the controller knows. */
  readonly phase: Phase | undefined;
  readonly condition: ConditionInput;
}

/** Where the machine is, as the condition says it. */
export function phaseView(status: MachineStatus): PhaseView {
  const phase = (PHASES as readonly string[]).includes(status.phase) ? (status.phase as Phase) : undefined;
  const entry = latestOf(status);
  const note = clean(entry?.message);
  if (phase === undefined) {
    return {
      phase,
      condition: {
        type: "MachineBootstrapped",
        status: "Unknown",
        reason: "UnknownPhase",
        message: `the service reports phase ${clean(status.phase).slice(0, 64)}`,
      },
    };
  }
  if (phase === "published") {
    return {
      phase,
      condition: {
        type: "MachineBootstrapped",
        status: "False",
        reason: "WaitingForMachine",
        message: "published; the machine has not fetched its config yet",
      },
    };
  }
  if (phase === "succeeded") {
    return {
      phase,
      condition: {
        type: "MachineBootstrapped",
        status: "True",
        reason: "Succeeded",
        message: note === "" ? "the machine reported succeeded" : note,
      },
    };
  }
  if (phase === "failed") {
    const parts: string[] = [];
    if (entry?.exitCode !== undefined) parts.push(`exit code ${entry.exitCode}`);
    if (entry?.attempt !== undefined) parts.push(`attempt ${entry.attempt}`);
    if (note !== "") parts.push(note);
    return {
      phase,
      condition: {
        type: "MachineBootstrapped",
        status: "False",
        reason: "Failed",
        message: `the machine reported failed${parts.length > 0 ? `: ${parts.join("; ")}` : ""}`,
      },
    };
  }
  return {
    phase,
    condition: {
      type: "MachineBootstrapped",
      status: "False",
      reason: camel(phase),
      message: note === "" ? `the machine reported ${phase}` : `${phase}: ${note}`,
    },
  };
}
