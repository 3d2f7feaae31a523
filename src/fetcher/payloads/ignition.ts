/**
 * Ignition configs (spec 3.0.0 to 3.4.0; 2.x translated first, ignition-v2.ts) as a
 * `bootseal fetch` payload, applied after boot under --root: storage.files, directories, links, systemd units and drop-ins, then systemctl
 * (ignition-systemd.ts). The config is read and checked whole (ignition-config.ts), every write
 * planned and checked against the path policy (ignition-plan.ts, write-plan.ts's planFiles)
 * before the first one; a failure undoes what the run did (write-plan.ts's rollback for the
 * files, ignition-fs.ts's journal for directories and links). docs/fetcher.md, "Ignition configs".
 */
import { randomBytes } from "node:crypto";
import { link, rename, unlink } from "node:fs/promises";
import { basename, join } from "node:path";
import { BootsealError } from "../../errors.ts";
import { syncDirectory } from "../../files/atomic-write.ts";
import { loadAccounts } from "../owners.ts";
import type { PathPolicy } from "../paths.ts";
import type { SelinuxLabeler } from "../selinux.ts";
import {
  applyPlan,
  atomicWriter,
  checkReserved,
  type FileWriter,
  type PlannedFile,
  planFiles,
  type Reserved,
} from "../write-plan.ts";
import { parseIgnitionConfig, parseJsonObject } from "./ignition-config.ts";
import { Journal } from "./ignition-fs.ts";
import { type IgnitionPlan, planIgnition } from "./ignition-plan.ts";
import { type SystemdControl, systemctlCalls } from "./ignition-systemd.ts";

export type { SystemdControl } from "./ignition-systemd.ts";

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

export interface IgnitionApplied {
  readonly written: readonly string[];
  /** The config writes /run/cluster-api/bootstrap-success.complete itself. */
  readonly writesSentinel: boolean;
  /** Zeroes the decoded contents kept in memory. */
  readonly wipe: () => void;
}

/** Cluster API's bootstrap sentinel. */
export const CAPI_SENTINEL = "/run/cluster-api/bootstrap-success.complete";

/** A JSON object with `ignition.version`: an Ignition config of some version (2.x included). */
export function isIgnitionConfig(payload: Uint8Array): boolean {
  const raw = parseJsonObject(payload);
  const ign = raw?.ignition;
  return (
    ign !== null && typeof ign === "object" && typeof (ign as Record<string, unknown>).version === "string"
  );
}

/** Special bits or world-writable: refused unless --allow-unsafe-modes (as for the manifest). */
function checkDirModes(plan: IgnitionPlan, allow: boolean): void {
  if (allow) return;
  for (const d of plan.directories) {
    if (d.mode !== undefined && (d.mode & 0o7002) !== 0) {
      throw new BootsealError(
        "BAD_INPUT",
        `ignition config: directory ${JSON.stringify(d.path)}: mode ${d.mode.toString(8).padStart(4, "0")} has set-id, sticky or world-writable bits; refused unless fetch runs with --allow-unsafe-modes`,
      );
    }
  }
}

/** Directories and links against each other, the files and the reserved paths. */
function checkSteps(plan: IgnitionPlan, files: readonly PlannedFile[], reserved: readonly Reserved[]): void {
  const seen = new Map<string, string>();
  const steps = [...plan.directories, ...plan.links];
  for (const file of files) seen.set(file.target.hostPath, file.target.requested);
  for (const s of steps) {
    const other = seen.get(s.target.hostPath);
    if (other !== undefined && s.target.requested !== other) {
      throw new BootsealError(
        "BAD_INPUT",
        `ignition config: ${JSON.stringify(s.path)} and ${JSON.stringify(other)} are the same path after links are followed`,
      );
    }
    seen.set(s.target.hostPath, s.path);
  }
  checkReserved(
    steps.map((s) => ({ target: s.target, content: new Uint8Array(0), mode: 0 })),
    reserved,
  );
}

/** A hard link put in place like a file: linked beside it, renamed over it. */
async function writeHardLink(existing: string, hostPath: string, hostDir: string): Promise<void> {
  const tmp = join(
    hostDir,
    `.${basename(hostPath).slice(0, 200)}.bootseal-link-${randomBytes(6).toString("hex")}.tmp`,
  );
  await link(existing, tmp);
  try {
    await rename(tmp, hostPath);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await syncDirectory(hostDir).catch(() => {});
}

/** Applies an Ignition config; see the module comment. Throws before writing on a bad config. */
export async function applyIgnition(
  payload: Uint8Array,
  ctx: IgnitionApplyContext,
): Promise<IgnitionApplied> {
  const cfg = parseIgnitionConfig(payload);
  const { policy } = ctx;
  const accounts = await loadAccounts(policy.root);
  const plan = await planIgnition(cfg, policy, accounts);
  const wipe = (): void => {
    for (const f of plan.files) f.content.fill(0);
  };
  try {
    const writesSentinel = cfg.files.some((f) => f.path === CAPI_SENTINEL);
    const sentinelHost = join(policy.root, CAPI_SENTINEL);
    // The payload's own sentinel is the one the run would write later: not a conflict.
    const reserved = writesSentinel
      ? ctx.reserved.filter((r) => r.target.hostPath !== sentinelHost)
      : ctx.reserved;
    checkDirModes(plan, ctx.allowUnsafeModes);
    const files = await planFiles(plan.files, policy, accounts, {
      allowUnsafeModes: ctx.allowUnsafeModes,
      reserved,
    });
    checkSteps(plan, files, reserved);
    const fileWriter = ctx.write ?? atomicWriter;
    const write: FileWriter = (target, data, options) => {
      const to = plan.hardLinks.get(target.hostPath);
      return to !== undefined
        ? writeHardLink(to, target.hostPath, target.hostDir)
        : fileWriter(target, data, options);
    };
    const journal = new Journal(ctx.log);
    try {
      for (const d of plan.directories) {
        await journal.mkdirs(d.target.missingDirs);
        await journal.setAttrs(d.target.hostPath, d.mode, d.uid, d.gid);
      }
      for (const l of plan.links) {
        await journal.mkdirs(l.target.missingDirs);
        if (l.setAside) await journal.setAside(l.target.hostPath);
        if (l.to !== null) await journal.symlink(l.target.hostPath, l.to, l.uid, l.gid);
      }
      await applyPlan(files, { labeler: ctx.labeler, write, log: ctx.log });
    } catch (err) {
      await journal.rollback();
      throw err;
    }
    await journal.commit();
    for (const args of systemctlCalls(cfg.units, policy.root)) {
      ctx.log(`systemctl ${args.join(" ")}`);
      await ctx.systemd.run(args);
    }
    const written = [
      ...plan.directories.map((d) => d.path),
      ...plan.links.map((l) => l.path),
      ...plan.files.map((f) => f.path),
    ];
    return { written, writesSentinel, wipe };
  } catch (err) {
    wipe();
    throw err;
  }
}
