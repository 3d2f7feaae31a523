/**
 * Planning an Ignition config's writes before the first one, with Ignition's rules (files
 * stage, internal/exec/stages/files and internal/exec/util in coreos/ignition):
 * - a file that exists is an error unless `overwrite` is true, or its `contents` have no
 *   source (then it keeps its bytes, `append` fragments are added, the mode and owner change
 *   only where given); a new file is 0644 unless `mode` says otherwise;
 * - owners: `user`/`group` by id or by name (<root>/etc/passwd and group); what is not given
 *   stays as it was, or is the fetcher's own for a new node (a user does not bring its
 *   primary group, unlike the manifest);
 * - directories 0755 unless `mode`; an existing directory only gets mode and owner;
 * - a link that exists with the same target is left alone; anything else there is an error
 *   unless `overwrite`; hard links come last, to an existing file or one of the config's;
 * - units in /etc/systemd/system (0644; always replaced), drop-ins in NAME.d/, a mask is a
 *   link to /dev/null, an unmask removes that link.
 * Regular files (units and hard links among them) become write-plan.ts specs; directories and
 * symbolic links are steps for ignition-fs.ts's journal.
 */
import type { Stats } from "node:fs";
import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { basename, dirname, join, posix } from "node:path";
import { BootsealError } from "../../errors.ts";
import { MAX_DOCUMENT_BYTES } from "../../limits.ts";
import type { FileSpec } from "../apply-manifest.ts";
import type { Accounts } from "../owners.ts";
import { displayPath, type PathPolicy, type ResolvedTarget, resolveTarget } from "../paths.ts";
import { type IgnitionConfig, type NodeEntry, SYSTEMD_DIR } from "./ignition-config.ts";
import { resourceBytes } from "./ignition-content.ts";

export interface DirectoryStep {
  readonly path: string;
  readonly target: ResolvedTarget;
  readonly mode: number | undefined;
  readonly uid: number;
  readonly gid: number;
}

export interface LinkStep {
  readonly path: string;
  readonly target: ResolvedTarget;
  /** The link's target; null to only remove what is there (an unmask). */
  readonly to: string | null;
  readonly setAside: boolean;
  readonly uid: number;
  readonly gid: number;
}

export interface IgnitionPlan {
  readonly directories: DirectoryStep[];
  readonly links: LinkStep[];
  readonly files: FileSpec[];
  /** Host path of a planned hard link -> host path of its target. */
  readonly hardLinks: Map<string, string>;
}

/** The most entries one config may have (files, directories, links, units and drop-ins). */
export const MAX_IGNITION_ENTRIES = 10_000;

const PROBE = ".bootseal-ignition-dir";

function bad(where: string, path: string, message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `ignition config: ${where} (${displayPath(path)}): ${message}`);
}

function self(): { uid: number; gid: number } {
  // Optional calls: Windows has neither (the fetcher builds for it too).
  return { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
}

function ids(
  node: NodeEntry,
  existing: { uid: number; gid: number } | null,
  accounts: Accounts,
  where: string,
): { uid: number; gid: number } {
  const base = existing ?? self();
  let uid = base.uid;
  let gid = base.gid;
  if (node.user?.id !== undefined) uid = node.user.id;
  else if (node.user?.name) {
    const u = accounts.users.get(node.user.name);
    if (u === undefined)
      throw bad(where, node.path, `unknown user ${JSON.stringify(node.user.name.slice(0, 64))}`);
    uid = u.id;
  }
  if (node.group?.id !== undefined) gid = node.group.id;
  else if (node.group?.name) {
    const g = accounts.groups.get(node.group.name);
    if (g === undefined)
      throw bad(where, node.path, `unknown group ${JSON.stringify(node.group.name.slice(0, 64))}`);
    gid = g.id;
  }
  return { uid, gid };
}

/** A directory path resolved like a file's (links followed, allowed roots): via a child name. */
async function resolveDirectory(
  path: string,
  policy: PathPolicy,
  overwrite = false,
): Promise<{ target: ResolvedTarget; existing: Stats | null }> {
  const asFile = await resolveTarget(path, policy).catch(() => null);
  if (asFile?.existing) {
    if (overwrite) {
      throw new BootsealError(
        "UNSUPPORTED",
        `ignition config: ${displayPath(path)}: bootseal fetch does not replace a file with a directory`,
      );
    }
    throw new BootsealError(
      "BAD_INPUT",
      `ignition config: ${displayPath(path)}: a file exists where the directory goes and overwrite is false`,
    );
  }
  const probe = await resolveTarget(path === "/" ? `/${PROBE}` : `${path}/${PROBE}`, policy).catch((err) => {
    // The probe name is ours, not the config's: keep it out of the message.
    if (err instanceof BootsealError)
      throw new BootsealError(err.code, err.message.replaceAll(`/${PROBE}`, ""));
    throw err;
  });
  const target: ResolvedTarget = {
    requested: path,
    logical: dirname(probe.logical),
    hostPath: probe.hostDir,
    hostDir: dirname(probe.hostDir),
    missingDirs: probe.missingDirs,
    existing: null,
  };
  const existing = probe.missingDirs.includes(probe.hostDir) ? null : await lstat(probe.hostDir);
  return { target, existing };
}

/** Where a link goes: its directory resolved, the link itself not followed. */
async function resolveLink(
  path: string,
  policy: PathPolicy,
): Promise<{ target: ResolvedTarget; existing: Stats | null }> {
  const dir = await resolveDirectory(dirname(path), policy);
  const hostPath = join(dir.target.hostPath, basename(path));
  const target: ResolvedTarget = {
    requested: path,
    logical: posix.join(dir.target.logical, basename(path)),
    hostPath,
    hostDir: dir.target.hostPath,
    missingDirs: dir.target.missingDirs,
    existing: null,
  };
  const existing = dir.existing === null ? null : await lstat(hostPath).catch(() => null);
  return { target, existing };
}

async function emptyDir(path: string): Promise<boolean> {
  return (await readdir(path)).length === 0;
}

function depth(path: string): number {
  return path.split("/").filter((s) => s !== "").length;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0] as Uint8Array;
  return new Uint8Array(Buffer.concat(parts));
}

/** Plans every write of the config; reads only. Throws before anything is written. */
export async function planIgnition(
  cfg: IgnitionConfig,
  policy: PathPolicy,
  accounts: Accounts,
): Promise<IgnitionPlan> {
  const dropins = cfg.units.reduce((n, u) => n + (u.dropins?.length ?? 0), 0);
  if (
    cfg.files.length + cfg.directories.length + cfg.links.length + cfg.units.length + dropins >
    MAX_IGNITION_ENTRIES
  ) {
    throw new BootsealError("BAD_INPUT", `ignition config: more than ${MAX_IGNITION_ENTRIES} entries`);
  }
  const plan: IgnitionPlan = { directories: [], links: [], files: [], hardLinks: new Map() };
  const sorted = cfg.directories.map((d, i) => ({ d, i })).sort((a, b) => depth(a.d.path) - depth(b.d.path));
  for (const { d, i } of sorted) {
    const where = `storage.directories[${i}]`;
    const { target, existing } = await resolveDirectory(d.path, policy, d.overwrite === true);
    if (!policy.allowedRoots.some((r) => r === "/" || d.path.startsWith(`${r}/`))) {
      throw new BootsealError(
        "PATH_NOT_ALLOWED",
        `refusing to change ${displayPath(d.path)}: not below the allowed roots`,
      );
    }
    let fresh = existing === null;
    if (existing !== null && d.overwrite === true) {
      if (!(await emptyDir(target.hostPath))) {
        throw new BootsealError(
          "UNSUPPORTED",
          `ignition config: ${where} (${displayPath(d.path)}): overwrite would delete a directory's contents; bootseal fetch does not`,
        );
      }
      fresh = true; // Ignition removes and recreates it: default mode and owner again
    }
    const { uid, gid } = ids(d, fresh ? null : existing, accounts, where);
    plan.directories.push({ path: d.path, target, mode: d.mode ?? (fresh ? 0o755 : undefined), uid, gid });
  }
  let document = 0;
  for (const [i, f] of cfg.files.entries()) {
    const where = `storage.files[${i}]`;
    const there = (await resolveLink(f.path, policy)).existing;
    if (there !== null && !there.isFile()) {
      if (f.overwrite === true) {
        throw new BootsealError(
          "UNSUPPORTED",
          `ignition config: ${where} (${displayPath(f.path)}): bootseal fetch does not replace a link, directory or special file with a file`,
        );
      }
      throw bad(where, f.path, "something other than a regular file exists there and overwrite is false");
    }
    const target = await resolveTarget(f.path, policy);
    const existing = target.existing;
    const source = f.contents?.source;
    if (existing !== null && f.overwrite !== true && source !== undefined) {
      throw bad(where, f.path, "a file exists there and overwrite is false");
    }
    const parts: Uint8Array[] = [];
    if (source !== undefined) parts.push(resourceBytes(f.contents ?? {}, `${where}.contents`));
    else if (existing !== null) {
      if (existing.size > MAX_DOCUMENT_BYTES)
        throw new BootsealError("TOO_LARGE", `${displayPath(f.path)} is too large to append to`);
      parts.push(new Uint8Array(await readFile(target.hostPath)));
    } else parts.push(new Uint8Array(0));
    (f.append ?? []).forEach((a, j) => {
      parts.push(resourceBytes(a, `${where}.append[${j}]`));
    });
    const kept = existing !== null && source === undefined ? existing : null;
    const mode = f.mode ?? (kept !== null ? kept.mode & 0o7777 : 0o644);
    const { uid, gid } = ids(f, kept, accounts, where);
    const unchanged =
      kept !== null &&
      (f.append ?? []).length === 0 &&
      mode === (kept.mode & 0o7777) &&
      uid === kept.uid &&
      gid === kept.gid;
    if (unchanged) continue; // Ignition rewrites nothing here either
    plan.files.push({
      document: ++document,
      path: f.path,
      content: concat(parts),
      mode,
      owner: String(uid),
      group: String(gid),
    });
  }
  const me = self();
  for (const u of cfg.units) {
    const unitPath = `${SYSTEMD_DIR}/${u.name}`;
    for (const d of u.dropins ?? []) {
      if (d.contents === undefined) continue;
      const content = new TextEncoder().encode(d.contents);
      plan.files.push({
        document: ++document,
        path: `${unitPath}.d/${d.name}`,
        content,
        mode: 0o644,
        owner: String(me.uid),
        group: String(me.gid),
      });
    }
    if (u.mask === true) {
      const { target, existing } = await resolveLink(unitPath, policy);
      const masked = existing?.isSymbolicLink() && (await readlink(target.hostPath)) === "/dev/null";
      if (masked) continue;
      if (existing?.isDirectory() && !(await emptyDir(target.hostPath))) {
        throw bad(`systemd.units ${u.name}`, unitPath, "a directory is where the mask link goes");
      }
      plan.links.push({ path: unitPath, target, to: "/dev/null", setAside: existing !== null, ...me });
      continue; // Ignition writes the contents, then replaces them with the mask link
    }
    if (u.mask === false) {
      const { target, existing } = await resolveLink(unitPath, policy);
      if (existing?.isSymbolicLink() && (await readlink(target.hostPath)) === "/dev/null") {
        if (u.contents) {
          throw new BootsealError(
            "UNSUPPORTED",
            `ignition config: unit ${JSON.stringify(u.name)}: unmasking and writing the unit in one run is not supported`,
          );
        }
        plan.links.push({ path: unitPath, target, to: null, setAside: true, ...me });
      }
    }
    if (u.contents) {
      const there = (await resolveLink(unitPath, policy)).existing;
      if (there?.isSymbolicLink() && u.mask !== false) {
        throw new BootsealError(
          "UNSUPPORTED",
          `ignition config: unit ${JSON.stringify(u.name)}: the unit file is a link (masked, or into /usr/lib); bootseal fetch does not replace it with the contents`,
        );
      }
      const content = new TextEncoder().encode(u.contents);
      plan.files.push({
        document: ++document,
        path: unitPath,
        content,
        mode: 0o644,
        owner: String(me.uid),
        group: String(me.gid),
      });
    }
  }
  const planned = new Set(plan.files.map((f) => f.path));
  for (const [i, l] of cfg.links.entries()) {
    const where = `storage.links[${i}]`;
    if (l.hard === true) {
      await planHardLink(plan, l, where, policy, planned, ++document);
      continue;
    }
    const { target, existing } = await resolveLink(l.path, policy);
    let setAside = false;
    if (existing !== null) {
      if (existing.isSymbolicLink() && l.overwrite !== true) {
        if (posix.normalize(await readlink(target.hostPath)) === posix.normalize(l.target)) continue;
        throw bad(where, l.path, "a link to another target exists there and overwrite is false");
      }
      if (l.overwrite !== true)
        throw bad(where, l.path, "something other than a link exists there and overwrite is false");
      if (existing.isDirectory() && !(await emptyDir(target.hostPath))) {
        throw new BootsealError(
          "UNSUPPORTED",
          `ignition config: ${where} (${displayPath(l.path)}): overwrite would delete a directory's contents; bootseal fetch does not`,
        );
      }
      setAside = true;
    }
    plan.links.push({ path: l.path, target, to: l.target, setAside, ...ids(l, null, accounts, where) });
  }
  return plan;
}

async function planHardLink(
  plan: IgnitionPlan,
  l: { path: string; target: string; overwrite?: boolean },
  where: string,
  policy: PathPolicy,
  planned: ReadonlySet<string>,
  document: number,
): Promise<void> {
  if (!l.target.startsWith("/"))
    throw new BootsealError(
      "UNSUPPORTED",
      `ignition config: ${where} (${displayPath(l.path)}): bootseal fetch takes hard link targets as absolute paths only`,
    );
  const to = await resolveTarget(posix.normalize(l.target), policy);
  if (to.existing === null && !planned.has(to.requested))
    throw bad(where, l.path, "the hard link's target does not exist");
  const there = (await resolveLink(l.path, policy)).existing;
  if (there !== null && !there.isFile()) {
    if (l.overwrite !== true)
      throw bad(where, l.path, "something other than the target exists there and overwrite is false");
    throw new BootsealError(
      "UNSUPPORTED",
      `ignition config: ${where} (${displayPath(l.path)}): bootseal fetch replaces only regular files with hard links`,
    );
  }
  const at = await resolveTarget(l.path, policy);
  if (at.existing !== null) {
    if (to.existing !== null && at.existing.ino === to.existing.ino && at.existing.dev === to.existing.dev)
      return;
    if (l.overwrite !== true) throw bad(where, l.path, "a file exists there and overwrite is false");
  }
  plan.hardLinks.set(at.hostPath, to.hostPath);
  plan.files.push({ document, path: l.path, content: new Uint8Array(0), mode: 0o644 });
}
