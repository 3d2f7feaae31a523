/**
 * Placeholder for the Ignition applier (Package B's file replaces it at merge): the real
 * detection, and an applier that refuses.
 */
import { BootsealError } from "../../errors.ts";
import type { PathPolicy } from "../paths.ts";
import type { SelinuxLabeler } from "../selinux.ts";
import type { FileWriter, Reserved } from "../write-plan.ts";

export interface IgnitionApplyContext {
  readonly policy: PathPolicy;
  readonly reserved: readonly Reserved[];
  readonly allowUnsafeModes: boolean;
  readonly labeler: SelinuxLabeler | null;
  readonly log: (line: string) => void;
  readonly write?: FileWriter;
  readonly systemd: SystemdControl;
  readonly env: Readonly<Record<string, string | undefined>>;
}
export interface SystemdControl {
  run(args: readonly string[]): Promise<void>;
} // `systemctl ARGS`, injectable
export interface IgnitionApplied {
  readonly written: readonly string[];
  readonly writesSentinel: boolean;
  readonly wipe: () => void;
}

/** `{"ignition":{"version":"3.…"}}`: a JSON object whose ignition.version is 3.x. */
export function isIgnitionConfig(payload: Uint8Array): boolean {
  let i = 0;
  while (
    i < payload.length &&
    (payload[i] === 0x20 || payload[i] === 0x0a || payload[i] === 0x0d || payload[i] === 0x09)
  )
    i++;
  if (payload[i] !== 0x7b) return false;
  try {
    const doc: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload));
    if (typeof doc !== "object" || doc === null) return false;
    const ignition = (doc as { ignition?: unknown }).ignition;
    if (typeof ignition !== "object" || ignition === null) return false;
    const version = (ignition as { version?: unknown }).version;
    return typeof version === "string" && version.startsWith("3.");
  } catch {
    return false;
  }
}

export async function applyIgnition(
  _payload: Uint8Array,
  _ctx: IgnitionApplyContext,
): Promise<IgnitionApplied> {
  throw new BootsealError("UNSUPPORTED", "ignition payloads are applied by src/fetcher/payloads/ignition.ts");
}
