/**
 * A creation rule's keys tried, one by one, with a throwaway data key: wrapped as a publish
 * wraps it (AWS KMS keys bound to a machine, ../machine/kms-binding.ts), and unwrapped again
 * where a credential for the key is here. The service's check (POST /v1/check) only wraps, as
 * a publish does; `bootseal check --config` also unwraps. The data key is random and dropped:
 * nothing wrapped here ever protects anything.
 */
import { generateKeyPairSync, randomBytes, timingSafeEqual } from "node:crypto";
import type { ProviderDeps } from "../../providers/keys/index.ts";
import { isEkFromPublish, withPublishedEk } from "../../providers/keys/tpm-sealed.ts";
import type { KeyEntry, MasterKey } from "../envelope/sops/master-key.ts";
import { describeError } from "../errors.ts";
import { bindKeyGroups } from "../machine/kms-binding.ts";
import type { MachineId } from "../machine/machine-id.ts";
import { newKeyFromEntry } from "./rule-keys.ts";
import { resolveCreationRule, type SopsConfig } from "./sops-config.ts";

/** The machine the probe's wraps are bound to: a namespace no cluster gives a machine. */
export const PROBE_MACHINE: MachineId = { namespace: "bootseal-check", name: "probe" };

export interface KeyProbe {
  /** 1-based, in the configuration's order. */
  readonly rule: number;
  readonly pathRegex: string | null;
  readonly kind: string;
  /** The key's identity string (never secret). */
  readonly id: string;
  /** "ok", or the failure as `CODE: message`. */
  readonly wrap: string;
  /** "ok", "no credential here", "not tried", or the failure as `CODE: message`. */
  readonly unwrap: string;
  /** Wrapped, and unwrapped or not tried or no credential for it: a publish can use the key. */
  readonly usable: boolean;
}

export const NO_CREDENTIAL = "no credential here";
export const NOT_TRIED = "not tried";

function failure(err: unknown): string {
  const { code, message } = describeError(err, "");
  return `${code}: ${message}`;
}

async function probeKey(
  key: MasterKey,
  unwrap: boolean,
  signal: AbortSignal,
): Promise<{ wrap: string; unwrap: string }> {
  const dataKey = new Uint8Array(randomBytes(32));
  let enc: string;
  try {
    enc = await key.wrap(dataKey, { signal });
  } catch (err) {
    return { wrap: failure(err), unwrap: NOT_TRIED };
  }
  if (!unwrap) return { wrap: "ok", unwrap: NOT_TRIED };
  try {
    const back = await key.unwrap(enc, { signal });
    if (back === null) return { wrap: "ok", unwrap: NO_CREDENTIAL };
    const same = back.length === dataKey.length && timingSafeEqual(back, dataKey);
    return { wrap: "ok", unwrap: same ? "ok" : "BAD_INPUT: unwrapped to a different data key" };
  } catch (err) {
    return { wrap: "ok", unwrap: failure(err) };
  }
}

/** A throwaway EK for a rule's `tpm_ek: publish` key: its sealing (policy included) runs for real. */
function withThrowawayEk(entry: KeyEntry): { entry: KeyEntry; id?: string } {
  if (!isEkFromPublish(entry)) return { entry };
  const { publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const ek = publicKey.export({ format: "der", type: "spki" }).toString("base64");
  return { entry: withPublishedEk(entry, ek, undefined, "probe"), id: "tpm: the EK each publish sends" };
}

/** Every key of every rule, in order; a key that cannot even be built fails its wrap. */
export async function probeRuleKeys(
  rules: SopsConfig,
  deps: ProviderDeps,
  options: { readonly unwrap: boolean; readonly signal: AbortSignal; readonly now?: Date },
): Promise<KeyProbe[]> {
  const out: KeyProbe[] = [];
  for (const [i, parsed] of (rules.creationRules ?? []).entries()) {
    const rule = resolveCreationRule(parsed);
    for (const entry of bindKeyGroups(rule.keyGroups, PROBE_MACHINE).flat()) {
      const base = { rule: i + 1, pathRegex: rule.pathRegex, kind: entry.kind };
      let result: { id: string; wrap: string; unwrap: string };
      try {
        const probed = withThrowawayEk(entry);
        const key = newKeyFromEntry(probed.entry, deps, options.now);
        result = { id: probed.id ?? key.id, ...(await probeKey(key, options.unwrap, options.signal)) };
      } catch (err) {
        result = { id: entry.kind, wrap: failure(err), unwrap: NOT_TRIED };
      }
      const usable = result.wrap === "ok" && ["ok", NO_CREDENTIAL, NOT_TRIED].includes(result.unwrap);
      out.push({ ...base, ...result, usable });
    }
  }
  return out;
}
