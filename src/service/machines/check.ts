/**
 * POST /v1/check's work: what only the service can try, since it owns the store and the keys
 * a publish uses. The store takes a write (a probe object created, read back and deleted) and
 * every key of every creation rule wraps a throwaway data key, as a publish would (wrap only:
 * the service needs no decrypt rights). `bootseal check` prints each result as one line.
 */
import { probeRuleKeys } from "../../config/key-probe.ts";
import { describeError } from "../../errors.ts";
import type { ServiceContext } from "../context.ts";

/** The store probe, and the key wraps together, each get this long before they count as failed. */
const CHECK_TIMEOUT_MS = 10_000;

export interface CheckResult {
  readonly name: string;
  readonly ok: boolean;
  readonly message: string;
}

export interface ServiceCheck {
  /** `publicUrl` as configured: what user-data stubs send machines to. */
  readonly publicUrl: string | null;
  /** Fetcher executables served from elsewhere (`fetcherArtifact*.url`), per operating system. */
  readonly fetcherArtifactUrls: { readonly linux: string | null; readonly windows: string | null };
  readonly checks: CheckResult[];
}

async function storeCheck(ctx: ServiceContext, signal: AbortSignal): Promise<CheckResult> {
  try {
    await ctx.machines.probeWrite({
      signal: AbortSignal.any([signal, AbortSignal.timeout(CHECK_TIMEOUT_MS)]),
    });
    return { name: "store", ok: true, message: "a probe object was written, read back and deleted" };
  } catch (err) {
    return { name: "store", ok: false, message: describeError(err, "").message };
  }
}

export async function runServiceCheck(ctx: ServiceContext, signal: AbortSignal): Promise<ServiceCheck> {
  const store = await storeCheck(ctx, signal);
  const keys = await probeRuleKeys(ctx.rules, ctx.keyDeps, {
    unwrap: false,
    signal: AbortSignal.any([signal, AbortSignal.timeout(CHECK_TIMEOUT_MS)]),
    now: ctx.now(),
  });
  return {
    publicUrl: ctx.publicUrl ?? null,
    fetcherArtifactUrls: {
      linux: ctx.fetcherArtifact?.url ?? null,
      windows: ctx.fetcherArtifactWindows?.url ?? null,
    },
    checks: [
      store,
      ...keys.map((k) => ({
        name: `rule ${k.rule} ${k.kind}`,
        ok: k.wrap === "ok",
        message: `${k.id}: ${k.wrap === "ok" ? "wraps a data key" : k.wrap}`,
      })),
    ],
  };
}
