/**
 * The machine <-> service status protocol (docs/api.md "Status"): the phases a machine goes
 * through and the limits of one report. The fetcher sends these, the service checks and stores
 * them, the controller maps them to conditions and the fleet page draws them: all from here.
 *
 * Pure constants and types with no Node API, so the fleet page's browser bundle imports this
 * file too.
 */

/** The phases a machine reports itself (`POST …/status`), in the order a boot goes through them. */
export const REPORTED_PHASES = [
  "fetching",
  "decrypted",
  "written",
  "running",
  "succeeded",
  "failed",
] as const;
export type ReportedPhase = (typeof REPORTED_PHASES)[number];

/** Every phase a status record can hold: `published` is set by the service on each publish. */
export const PHASES = ["published", ...REPORTED_PHASES] as const;
export type Phase = (typeof PHASES)[number];

/** Each phase's place in a boot (`published` first): its index in PHASES. */
export const PHASE_ORDER: ReadonlyMap<Phase, number> = new Map(PHASES.map((p, i) => [p, i]));

/** A boot ends in one of these; a new publish starts it again. */
export const TERMINAL_PHASES: readonly Phase[] = ["succeeded", "failed"];

export function isTerminalPhase(phase: string | undefined): boolean {
  return phase === "succeeded" || phase === "failed";
}

/** A report's `message`, at most (UTF-8 bytes; the fetcher cuts, the service refuses more). */
export const REPORT_MESSAGE_MAX_BYTES = 4 * 1024;
/** A report's `output` (the command's last output), at most (UTF-8 bytes; its end is kept). */
export const REPORT_OUTPUT_MAX_BYTES = 16 * 1024;
