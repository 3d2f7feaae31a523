/**
 * Applying a cloud-config as cloud-init 22.4.2 would, in its order (/etc/cloud/cloud.cfg):
 * bootcmd, write_files (entries without `defer`), disk_setup and mounts (handed to the machine's
 * cloud-init, cloud-init-single.ts), users_groups (init stage), ntp (config stage), the deferred
 * files (final stage, still before the runcmd script runs), then runcmd, which fetch-run runs as the
 * bootstrap command.
 *
 * The files go through the write plan (paths, rollback, atomic writes, the root's own users),
 * with cloud-init's results: the mode from `permissions` (default 0644; 0 leaves the mode as
 * it is), owner `user:group` (default root:root; a missing part leaves it as it is, so a bare
 * `user` keeps the group), `append` added to what is there, and two entries for one path
 * folded in order as cloud-init's two writes would leave the file.
 */
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { posix } from "node:path";
import { BootsealError } from "../../errors.ts";
import { describeBytes, MAX_DOCUMENT_BYTES } from "../../limits.ts";
import type { FileSpec } from "../apply-manifest.ts";
import { COMMAND_UMASK } from "../exec.ts";
import { type Accounts, loadAccounts } from "../owners.ts";
import { displayPath, type PathPolicy, type ResolvedTarget } from "../paths.ts";
import type { SelinuxLabeler } from "../selinux.ts";
import {
  applyPlanOrWipe,
  type FileWriter,
  type PlannedFile,
  planFiles,
  type Reserved,
} from "../write-plan.ts";
import { type CloudCommand, parseCloudConfig, type WriteFileEntry } from "./cloud-config-parse.ts";
import { renderJinjaUserData } from "./cloud-init-jinja.ts";
import { applyNtp } from "./cloud-init-ntp.ts";
import { runHandedModules } from "./cloud-init-single.ts";
import { applyUsersGroups } from "./cloud-init-users.ts";
import type { CommandRunner } from "./commands.ts";

export interface CloudConfigContext {
  readonly policy: PathPolicy;
  /** The marker: no payload file may take its place. */
  readonly marker: Reserved;
  /** The Cluster API sentinel (its --sentinel path), null when disabled. */
  readonly sentinel: (Reserved & { readonly path: string }) | null;
  readonly allowUnsafeModes: boolean;
  readonly allowUnknownModules: boolean;
  readonly labeler: SelinuxLabeler | null;
  readonly log: (line: string) => void;
  readonly write?: FileWriter;
  /** Runs bootcmd (before the files are planned: it may create users or directories). */
  readonly run: CommandRunner;
  /** --skip-module names. */
  readonly skipModules?: readonly string[];
  /** The clock cloud-init's file headers are stamped with (sudoers); a seam for tests. */
  readonly now?: () => Date;
}

export interface CloudConfigApplied {
  readonly written: readonly string[];
  /** The bootstrap command, run by fetch-run after the files. */
  readonly runcmd: readonly CloudCommand[];
  /** write_files or runcmd writes the sentinel itself. */
  readonly writesSentinel: boolean;
  readonly wipe: () => void;
}

/** os.path.abspath, with cloud-init's working directory `/`. */
function absolute(path: string): string {
  return posix.resolve("/", path);
}

function mentions(command: CloudCommand, path: string): boolean {
  return "shell" in command ? command.shell.includes(path) : command.argv.some((a) => a.includes(path));
}

function lookup(table: Accounts["users"], name: string, what: string, entry: WriteFileEntry): number {
  const account = table.get(name);
  if (account !== undefined) return account.id;
  if (/^\d+$/.test(name) && Number(name) <= 0xfffffffe) return Number(name);
  throw new BootsealError(
    "BAD_INPUT",
    `cloud-config: write_files entry ${entry.index} (${displayPath(entry.path)}): unknown ${what} ${JSON.stringify(name.slice(0, 64))}`,
  );
}

/** The bytes of the file being appended to (not through a link, at most the document cap). */
async function existingBytes(target: ResolvedTarget): Promise<Uint8Array> {
  const handle = await open(
    target.hostPath,
    constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
  );
  try {
    const info = await handle.stat();
    if (!info.isFile())
      throw new BootsealError("PATH_NOT_ALLOWED", `${displayPath(target.requested)} is not a regular file`);
    if (info.size > MAX_DOCUMENT_BYTES) {
      throw new BootsealError(
        "TOO_LARGE",
        `${displayPath(target.requested)}: cannot append to a file larger than ${describeBytes(MAX_DOCUMENT_BYTES)}`,
      );
    }
    return new Uint8Array(await handle.readFile());
  } finally {
    await handle.close();
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/**
 * The mode a file opened by Python's open() gets when cloud-init does not chmod it: 0666 under
 * cloud-init's umask 022 (COMMAND_UMASK), not the fetcher's own UMask=0077.
 */
function creationMode(): number {
  return 0o666 & ~COMMAND_UMASK;
}

/** What the entries for one path leave behind, applied in order to what is there. */
async function fold(
  entries: readonly WriteFileEntry[],
  target: ResolvedTarget,
  accounts: Accounts,
): Promise<Omit<PlannedFile, "target">> {
  const existing = target.existing;
  let content: Uint8Array | null = null;
  let mode = existing ? existing.mode & 0o7777 : creationMode();
  let uid = existing?.uid;
  let gid = existing?.gid;
  for (const entry of entries) {
    if (entry.append)
      content = concat(content ?? (existing ? await existingBytes(target) : new Uint8Array()), entry.content);
    else content = entry.content;
    if (entry.mode !== 0) mode = entry.mode;
    if (entry.user !== null) uid = lookup(accounts.users, entry.user, "user", entry);
    if (entry.group !== null) gid = lookup(accounts.groups, entry.group, "group", entry);
  }
  return {
    content: content ?? new Uint8Array(),
    mode,
    ...(uid !== undefined ? { uid } : {}),
    ...(gid !== undefined ? { gid } : {}),
  };
}

/** Plans and writes one batch of write_files entries (entries for one path folded in order). */
async function writeEntries(
  entries: readonly WriteFileEntry[],
  ctx: CloudConfigContext,
  reserved: readonly Reserved[],
  planned: PlannedFile[],
  wipe: () => void,
): Promise<void> {
  // Read per batch: the deferred files may name users that users_groups has just created.
  const accounts = await loadAccounts(ctx.policy.root);
  const byPath = new Map<string, WriteFileEntry[]>();
  for (const entry of entries) {
    const path = absolute(entry.path);
    const list = byPath.get(path);
    if (list) list.push(entry);
    else byPath.set(path, [entry]);
  }
  // planFiles checks paths, the entries against each other and the final mode; owners are
  // resolved here, since cloud-init's `user` alone keeps the group (not the primary group).
  const specs: FileSpec[] = [...byPath].map(([path, list]) => ({
    document: (list[0] as WriteFileEntry).index,
    path,
    content: new Uint8Array(),
    mode: list.reduce((m, e) => (e.mode !== 0 ? e.mode : m), 0),
  }));
  const targets = await planFiles(specs, ctx.policy, accounts, {
    allowUnsafeModes: ctx.allowUnsafeModes,
    reserved,
  });
  const batch: PlannedFile[] = [];
  const entryLists = [...byPath.values()];
  for (const [i, file] of targets.entries()) {
    batch.push({
      target: file.target,
      ...(await fold(entryLists[i] as WriteFileEntry[], file.target, accounts)),
    });
  }
  planned.push(...batch);
  await applyPlanOrWipe(
    batch,
    { labeler: ctx.labeler, log: ctx.log, ...(ctx.write ? { write: ctx.write } : {}) },
    wipe,
  );
}

export async function applyCloudConfig(
  payload: Uint8Array,
  ctx: CloudConfigContext,
): Promise<CloudConfigApplied> {
  const userData = await renderJinjaUserData(payload, ctx.policy.root, ctx.log);
  const config = parseCloudConfig(userData, {
    allowUnknownModules: ctx.allowUnknownModules,
    skipModules: ctx.skipModules ?? [],
    warn: ctx.log,
  });
  const now = config.writeFiles.filter((f) => !f.defer);
  const deferred = config.writeFiles.filter((f) => f.defer);
  const sentinelPath = ctx.sentinel ? absolute(ctx.sentinel.path) : null;
  const writesSentinel =
    sentinelPath !== null &&
    (config.writeFiles.some((f) => absolute(f.path) === sentinelPath) ||
      config.runcmd.some((c) => mentions(c, sentinelPath)));
  if (config.bootcmd.length > 0) await ctx.run("bootcmd", config.bootcmd);

  const reserved = [ctx.marker];
  if (ctx.sentinel && !writesSentinel) reserved.push(ctx.sentinel);
  const planned: PlannedFile[] = [];
  const wipe = (): void => {
    for (const f of planned) f.content.fill(0);
    for (const f of config.writeFiles) f.content.fill(0);
  };
  const modules = config.handed.size > 0 || config.usersGroups !== null || config.ntp !== null;
  if (!modules) {
    // Nothing runs between the two batches: one plan, checked whole before anything is written.
    await writeEntries([...now, ...deferred], ctx, reserved, planned, wipe);
  } else {
    await writeEntries(now, ctx, reserved, planned, wipe);
    await runHandedModules(config.handed, ctx.run);
    const machine = { root: ctx.policy.root, run: ctx.run, log: ctx.log, now: ctx.now ?? (() => new Date()) };
    if (config.usersGroups !== null) await applyUsersGroups(config.usersGroups, machine);
    if (config.ntp !== null) await applyNtp(config.ntp, machine);
    await writeEntries(deferred, ctx, reserved, planned, wipe);
  }
  return { written: planned.map((f) => f.target.requested), runcmd: config.runcmd, writesSentinel, wipe };
}
