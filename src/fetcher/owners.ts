/**
 * User and group names to ids for `owner`/`group` in a manifest. Names are looked up in
 * <root>/etc/passwd and <root>/etc/group (the image being prepared knows its own users),
 * falling back to the host's /etc files when the root has none. Only the files are read,
 * not NSS: at first boot LDAP or SSSD are rarely up, and a numeric id always works.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { BootsealError } from "../errors.ts";
import { displayPath } from "./paths.ts";

/** An account name for a message: quoted, control characters escaped, at most 64 characters. */
function displayName(name: string): string {
  return JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);
}

export interface Account {
  readonly id: number;
  /** Primary group, for users. */
  readonly gid?: number;
  /** The home directory, for users. */
  readonly home?: string;
  /** The member list, for groups. */
  readonly members?: readonly string[];
}

export type AccountTable = ReadonlyMap<string, Account>;

export function parsePasswd(text: string): Map<string, Account> {
  const out = new Map<string, Account>();
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const f = line.split(":");
    const [name, , uid, gid, , home] = f;
    if (!name || uid === undefined || !/^\d+$/.test(uid)) continue;
    out.set(name, {
      id: Number(uid),
      ...(gid && /^\d+$/.test(gid) ? { gid: Number(gid) } : {}),
      ...(home !== undefined ? { home } : {}),
    });
  }
  return out;
}

export function parseGroup(text: string): Map<string, Account> {
  const out = new Map<string, Account>();
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const [name, , gid, members] = line.split(":");
    if (!name || gid === undefined || !/^\d+$/.test(gid)) continue;
    out.set(name, { id: Number(gid), members: members ? members.split(",") : [] });
  }
  return out;
}

async function readTable(root: string, file: string): Promise<string> {
  try {
    return await readFile(join(root, "etc", file), "utf8");
  } catch {
    return await readFile(join("/etc", file), "utf8").catch(() => "");
  }
}

export interface Accounts {
  readonly users: AccountTable;
  readonly groups: AccountTable;
}

export async function loadAccounts(root: string): Promise<Accounts> {
  const [passwd, group] = await Promise.all([readTable(root, "passwd"), readTable(root, "group")]);
  return { users: parsePasswd(passwd), groups: parseGroup(group) };
}

const MAX_ID = 0xfffffffe;

function numericId(text: string): number | null {
  if (!/^\d+$/.test(text)) return null;
  const n = Number(text);
  return n <= MAX_ID ? n : null;
}

/** uid and gid for an owner/group pair; a user's primary group when only the owner is given. */
export function resolveOwnership(
  owner: string | undefined,
  group: string | undefined,
  accounts: Accounts,
  path: string,
): { uid?: number; gid?: number } {
  let uid: number | undefined;
  let gid: number | undefined;
  if (owner !== undefined) {
    const n = numericId(owner);
    const user = n === null ? accounts.users.get(owner) : undefined;
    if (n === null && user === undefined)
      throw new BootsealError("BAD_INPUT", `${displayPath(path)}: unknown user ${displayName(owner)}`);
    uid = n ?? user?.id;
    if (group === undefined && user?.gid !== undefined) gid = user.gid;
  }
  if (group !== undefined) {
    const n = numericId(group);
    const g = n === null ? accounts.groups.get(group) : undefined;
    if (n === null && g === undefined)
      throw new BootsealError("BAD_INPUT", `${displayPath(path)}: unknown group ${displayName(group)}`);
    gid = n ?? g?.id;
  }
  return { ...(uid !== undefined ? { uid } : {}), ...(gid !== undefined ? { gid } : {}) };
}
