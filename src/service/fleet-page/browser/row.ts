/**
 * A machine as the page holds it: its list summary and a phase an event reported that the
 * store does not have yet. Types and the row's key only, so the pure modules that read rows
 * (machine-time.ts, fleet-stats.ts, table-query.ts) need nothing of the DOM.
 */
import type { Phase } from "../../../machine/status-protocol.ts";
import type { Summary } from "./api.ts";

/** A phase an event reported, and when. */
export interface Reported {
  phase: Phase;
  at: string;
}

export interface Row extends Summary {
  /** A phase reported (event) after the stored one: held by the service, not yet written. */
  pending?: Reported;
}

export const keyOf = (m: { namespace: string; name: string }) => `${m.namespace}/${m.name}`;
