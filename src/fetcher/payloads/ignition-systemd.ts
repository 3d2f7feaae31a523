/**
 * systemd after an Ignition config's units are written. Ignition runs before systemd and only
 * writes presets (`enable NAME` in 20-ignition.preset), which systemd applies at its first
 * start; the fetcher runs after boot, so it does the equivalent itself: on the running system
 * (`--root /`) `daemon-reload`, `enable` the units marked enabled, `disable` those marked
 * disabled, and `start --no-block` the enabled ones (they missed this boot's transaction;
 * --no-block because a unit ordered after the fetcher's own would wait for it). Under another
 * --root (an image) only `systemctl --root DIR enable|disable`: that system is not running.
 */
import type { Unit } from "./ignition-config.ts";

export interface SystemdControl {
  /** Runs `systemctl ARGS`; rejects when it fails. */
  run(args: readonly string[]): Promise<void>;
}

/** The systemctl calls for these units, in order (none when the config has no units). */
export function systemctlCalls(units: readonly Unit[], root: string): string[][] {
  if (units.length === 0) return [];
  const enable = units.filter((u) => u.enabled === true && u.mask !== true).map((u) => u.name);
  const disable = units.filter((u) => u.enabled === false).map((u) => u.name);
  if (root !== "/") {
    const calls: string[][] = [];
    if (enable.length > 0) calls.push(["--root", root, "enable", ...enable]);
    if (disable.length > 0) calls.push(["--root", root, "disable", ...disable]);
    return calls;
  }
  const calls: string[][] = [["daemon-reload"]];
  if (enable.length > 0) calls.push(["enable", ...enable]);
  if (disable.length > 0) calls.push(["disable", ...disable]);
  if (enable.length > 0) calls.push(["start", "--no-block", ...enable]);
  return calls;
}
