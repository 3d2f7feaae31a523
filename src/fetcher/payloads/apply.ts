/**
 * One applier per payload kind (kind.ts says which): what each wrote, the payload's own
 * bootstrap command (a cloud-config's runcmd) and whether the payload writes the Cluster API
 * sentinel itself. fetch-run runs the command and decides about marker and sentinel.
 */
import { BootsealError } from "../../errors.ts";
import { parseManifest } from "../apply-manifest.ts";
import type { ExecResult } from "../exec.ts";
import { loadAccounts } from "../owners.ts";
import { type PathPolicy, resolveTarget } from "../paths.ts";
import type { SelinuxLabeler } from "../selinux.ts";
import {
  applyPlanOrWipe,
  checkReserved,
  type FileWriter,
  type PlannedFile,
  planFiles,
  type Reserved,
} from "../write-plan.ts";
import { applyCloudConfig } from "./cloud-config.ts";
import type { CloudCommand } from "./cloud-config-parse.ts";
import { applyIgnition, type SystemdControl } from "./ignition.ts";
import type { PayloadKind } from "./kind.ts";

export interface PayloadContext {
  readonly policy: PathPolicy;
  readonly marker: Reserved;
  readonly sentinel: (Reserved & { readonly path: string }) | null;
  /** --out: the raw payload's file. */
  readonly out?: string;
  readonly allowUnsafeModes: boolean;
  readonly allowUnknownModules: boolean;
  /** --skip-module: cloud-config modules left out with a warning. */
  readonly skipModules?: readonly string[];
  readonly labeler: SelinuxLabeler | null;
  readonly log: (line: string) => void;
  readonly write?: FileWriter;
  readonly systemd: SystemdControl;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Runs a list of payload commands (bootcmd), stopping at the first failure. */
  readonly run: (module: string, commands: readonly CloudCommand[]) => Promise<readonly ExecResult[]>;
}

export interface AppliedPayload {
  readonly kind: PayloadKind;
  /** The paths written, as the payload named them. */
  readonly written: readonly string[];
  /** The payload's bootstrap command (runcmd), empty for the other kinds. */
  readonly commands: readonly CloudCommand[];
  readonly writesSentinel: boolean;
  /** Zeroes the decrypted bytes the applier still holds. */
  readonly wipe: () => void;
}

function reservedOf(ctx: PayloadContext): Reserved[] {
  return ctx.sentinel ? [ctx.marker, ctx.sentinel] : [ctx.marker];
}

async function writePlanned(
  kind: PayloadKind,
  planned: PlannedFile[],
  ctx: PayloadContext,
): Promise<AppliedPayload> {
  const wipe = (): void => {
    for (const f of planned) f.content.fill(0);
  };
  await applyPlanOrWipe(
    planned,
    { labeler: ctx.labeler, log: ctx.log, ...(ctx.write ? { write: ctx.write } : {}) },
    wipe,
  );
  return { kind, written: planned.map((f) => f.target.requested), commands: [], writesSentinel: false, wipe };
}

export async function applyPayload(
  kind: PayloadKind,
  payload: Uint8Array,
  ctx: PayloadContext,
): Promise<AppliedPayload> {
  switch (kind) {
    case "raw": {
      if (ctx.out === undefined) throw new BootsealError("USAGE", "a raw payload is written to --out FILE");
      const out = [{ target: await resolveTarget(ctx.out, ctx.policy), content: payload, mode: 0o600 }];
      checkReserved(out, reservedOf(ctx));
      return writePlanned(kind, out, ctx);
    }
    case "manifest": {
      const specs = parseManifest(payload);
      const accounts = await loadAccounts(ctx.policy.root);
      const planned = await planFiles(specs, ctx.policy, accounts, {
        allowUnsafeModes: ctx.allowUnsafeModes,
        reserved: reservedOf(ctx),
      });
      return writePlanned(kind, planned, ctx);
    }
    case "cloud-config": {
      const applied = await applyCloudConfig(payload, ctx);
      return {
        kind,
        written: applied.written,
        commands: applied.runcmd,
        writesSentinel: applied.writesSentinel,
        wipe: applied.wipe,
      };
    }
    case "ignition": {
      const applied = await applyIgnition(payload, {
        policy: ctx.policy,
        reserved: reservedOf(ctx),
        allowUnsafeModes: ctx.allowUnsafeModes,
        labeler: ctx.labeler,
        log: ctx.log,
        systemd: ctx.systemd,
        env: ctx.env,
        ...(ctx.write ? { write: ctx.write } : {}),
      });
      return {
        kind,
        written: applied.written,
        commands: [],
        writesSentinel: applied.writesSentinel,
        wipe: applied.wipe,
      };
    }
  }
}
