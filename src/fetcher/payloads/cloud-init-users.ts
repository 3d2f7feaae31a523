/**
 * cloud-init 22.4.2's users_groups module (cc_users_groups, its distro layer and ssh_util),
 * applied as it applies it: `groups` created first (groupadd; members added with usermod),
 * then each user in order: useradd with cloud-init's argument mapping unless the user exists
 * (its groups created first), `passwd -l` unless `lock_passwd` is false, the `sudo` rules
 * in /etc/sudoers.d/90-cloud-init-users (the #includedir added to /etc/sudoers when
 * missing), the `ssh_authorized_keys` merged into the file sshd's AuthorizedKeysFile names
 * (~/.ssh/authorized_keys by default), with cloud-init's modes and owners.
 *
 * What needs what bootseal does not have is refused (BAD_INPUT): the distro's `default`
 * user (it comes from cloud-init's own system configuration), `snapuser`,
 * `ssh_redirect_user`, `ssh_import_id`, `plain_text_passwd`/`hashed_passwd` (chpasswd reads
 * them from standard input), the deprecated string and mapping forms of `users`.
 */
import { posix } from "node:path";
import type { BootsealError } from "../../errors.ts";
import {
  accounts,
  bad as badIn,
  chownPath,
  cloudInitHeader,
  ensureDir,
  exists,
  isDir,
  type Machine,
  modeOf,
  readText,
  runTool,
  shownName,
  which,
  writeText,
} from "./cloud-init-machine.ts";
import { isPyMap, type PyValue, pyStr, truthy } from "./cloud-init-values.ts";

const MODULE = "users_groups";
const SUDOERS = "/etc/sudoers";
const CI_SUDOERS = "/etc/sudoers.d/90-cloud-init-users";

function bad(message: string): BootsealError {
  return badIn(MODULE, message);
}

/** A user's settings, keys as cloud-init normalizes them (`-` to `_`). */
export type UserConfig = ReadonlyMap<string, PyValue>;

export interface UsersGroups {
  /** Group name to its members (sorted, unique), in the order given. */
  readonly groups: ReadonlyMap<string, readonly string[]>;
  readonly users: ReadonlyMap<string, UserConfig>;
}

/** util.uniq_merge of one value: a string split on commas (empties dropped), a list as is. */
function uniqMerge(value: PyValue): PyValue[] {
  const list =
    typeof value === "string"
      ? value
          .trim()
          .split(",")
          .filter((s) => s !== "")
      : Array.isArray(value)
        ? [...(value as readonly PyValue[])]
        : null;
  if (list === null) throw bad("a list of names that is neither a string nor a list");
  const out: PyValue[] = [];
  for (const v of list) if (!out.includes(v)) out.push(v);
  return out;
}

function names(value: PyValue, what: string): string[] {
  return uniqMerge(value).map((v) => {
    if (typeof v !== "string") throw bad(`${what} must be names`);
    return v;
  });
}

/** ug_util._normalize_groups. */
function normalizeGroups(value: PyValue): Map<string, string[]> {
  const members = new Map<string, string[]>();
  const add = (name: PyValue, list: readonly string[]): void => {
    if (typeof name !== "string") throw bad("a group name that is not a string");
    members.set(name, [...(members.get(name) ?? []), ...list]);
  };
  const entries = typeof value === "string" ? value.trim().split(",") : value;
  if (Array.isArray(entries)) {
    for (const entry of entries as readonly PyValue[]) {
      if (typeof entry === "string") {
        if (!members.has(entry)) members.set(entry, []);
      } else if (isPyMap(entry)) {
        for (const [k, v] of entry) {
          if (typeof v !== "string" && !Array.isArray(v))
            throw bad("group members must be a string or a list");
          add(k as PyValue, typeof v === "string" ? [v] : (v as string[]));
        }
      } else throw bad("groups entries must be names or mappings of a name to its members");
    }
  } else if (isPyMap(entries)) {
    for (const [k, v] of entries) add(k as PyValue, v === null ? [] : names(v, "group members"));
  } else throw bad("groups must be a string, a list or a mapping");
  const out = new Map<string, string[]>();
  for (const [name, list] of members) out.set(name, names(list, "group members").sort());
  return out;
}

/** ug_util._normalize_users, for the list form (the one the kubeadm provider writes). */
function normalizeUsers(value: PyValue): Map<string, Map<string, PyValue>> {
  if (!Array.isArray(value)) {
    throw bad("users must be a list (the deprecated string and mapping forms are not applied)");
  }
  const users = new Map<string, Map<string, PyValue>>();
  for (const entry of value as readonly PyValue[]) {
    if (typeof entry === "string" || Array.isArray(entry)) {
      for (const name of uniqMerge(entry)) {
        if (typeof name !== "string") throw bad("a user name that is not a string");
        if (name === "default") throw defaultUser();
        if (name !== "" && !users.has(name)) users.set(name, new Map());
      }
    } else if (isPyMap(entry)) {
      const name = entry.has("name") ? entry.get("name") : "default";
      if (name === "default") throw defaultUser();
      if (typeof name !== "string") throw bad("a user name that is not a string");
      if (users.has(name)) throw bad(`the user ${shownName(name)} is listed twice`);
      const config = new Map<string, PyValue>();
      for (const [k, v] of entry) {
        if (k === "name") continue;
        if (typeof k !== "string") throw bad(`a setting of ${shownName(name)} that is not a string`);
        const key = k.replaceAll("-", "_").trim();
        if (key !== "") config.set(key, v);
      }
      users.set(name, config);
    } else throw bad("users entries must be names or mappings");
  }
  return users;
}

function defaultUser(): BootsealError {
  return bad(
    'the "default" user comes from cloud-init\'s own system configuration (system_info.default_user); bootseal does not create it',
  );
}

const REFUSED: readonly [string, string][] = [
  ["snapuser", "a snap user needs snapd's create-user"],
  ["ssh_redirect_user", "it needs the cloud's public keys from cloud-init's datasource"],
  ["ssh_import_id", "cloud-init imports those keys in its own ssh_import_id module"],
  ["plain_text_passwd", "chpasswd takes it on standard input"],
  ["hashed_passwd", "chpasswd takes it on standard input"],
];

/** The `users` and `groups` keys; null when the config has neither. */
export function parseUsersGroups(root: ReadonlyMap<unknown, PyValue>): UsersGroups | null {
  if (!root.has("users") && !root.has("groups")) return null;
  const groups = root.has("groups") ? normalizeGroups(root.get("groups") as PyValue) : new Map();
  const usersValue = root.get("users");
  const users = usersValue === undefined || usersValue === null ? new Map() : normalizeUsers(usersValue);
  for (const [name, config] of users) {
    for (const [key, why] of REFUSED) {
      if (truthy(config.get(key) ?? null) || (key === "snapuser" && config.has(key)))
        throw bad(`${shownName(name)}: ${key} is not applied (${why})`);
    }
    const noHome = ["no_create_home", "system"].filter((k) => truthy(config.get(k) ?? null));
    if (noHome.length > 0 && truthy(config.get("ssh_authorized_keys") ?? null))
      throw bad(`${shownName(name)}: ssh_authorized_keys cannot go with ${noHome.join(", ")}`);
  }
  return { groups, users };
}

const USERADD_OPTS: Readonly<Record<string, string>> = {
  gecos: "--comment",
  homedir: "--home",
  primary_group: "--gid",
  uid: "--uid",
  groups: "--groups",
  passwd: "--password",
  shell: "--shell",
  expiredate: "--expiredate",
  inactive: "--inactive",
  selinux_user: "--selinux-user",
};
const USERADD_FLAGS: Readonly<Record<string, string>> = {
  no_user_group: "--no-user-group",
  system: "--system",
  no_log_init: "--no-log-init",
};

/** The shadow tools act on --root when it is not `/` (`--root DIR`, as useradd -R). */
function tool(m: Machine, argv: readonly string[]): string[] {
  const [name, ...rest] = argv as [string, ...string[]];
  return m.root === "/" ? [name, ...rest] : [name, "--root", m.root, ...rest];
}

async function isUser(m: Machine, name: string): Promise<boolean> {
  return (await accounts(m)).users.has(name);
}

async function isGroup(m: Machine, name: string): Promise<boolean> {
  return (await accounts(m)).groups.has(name);
}

/** Distro.create_group: groupadd unless it exists (a failure only logged), then its members. */
async function createGroup(m: Machine, name: string, members: readonly string[]): Promise<void> {
  if (await isGroup(m, name)) m.log(`cloud-config: ${MODULE}: the group ${shownName(name)} exists; skipped`);
  else await runTool(m, MODULE, tool(m, ["groupadd", name]), true);
  for (const member of members) {
    if (!(await isUser(m, member))) {
      m.log(`cloud-config: ${MODULE}: no user ${shownName(member)} to add to ${shownName(name)}`);
      continue;
    }
    await runTool(m, MODULE, tool(m, ["usermod", "-a", "-G", name, member]));
  }
}

/** Distro.add_user: useradd with cloud-init's mapping, unless the user exists. */
async function addUser(m: Machine, name: string, config: UserConfig): Promise<void> {
  if (await isUser(m, name)) {
    m.log(`cloud-config: ${MODULE}: the user ${shownName(name)} exists; useradd skipped`);
    return;
  }
  const kwargs = new Map(config);
  const createGroups = kwargs.has("create_groups") ? truthy(kwargs.get("create_groups") as PyValue) : true;
  kwargs.delete("create_groups");
  let groups: PyValue[] = [];
  const groupsValue = kwargs.get("groups") ?? null;
  if (truthy(groupsValue)) {
    const list =
      typeof groupsValue === "string"
        ? groupsValue.split(",")
        : isPyMap(groupsValue)
          ? [...groupsValue.keys()]
          : Array.isArray(groupsValue)
            ? [...(groupsValue as readonly PyValue[])]
            : null;
    if (list === null) throw bad(`${shownName(name)}: groups must be a string or a list`);
    groups = list.map((g) => {
      if (typeof g !== "string") throw bad(`${shownName(name)}: a group name that is not a string`);
      return g.trim();
    });
    kwargs.set("groups", groups.join(","));
    const primary = kwargs.get("primary_group") ?? null;
    if (truthy(primary)) {
      if (typeof primary !== "string") throw bad(`${shownName(name)}: primary_group must be a name`);
      groups.push(primary);
    }
  }
  if (createGroups) {
    for (const group of groups as string[]) {
      if (!(await isGroup(m, group))) await createGroup(m, group, []);
    }
  }
  if (kwargs.has("uid")) {
    const uid = pyStr(kwargs.get("uid") as PyValue);
    if (uid === null) throw bad(`${shownName(name)}: uid must be a number`);
    kwargs.set("uid", uid);
  }
  const argv = ["useradd", name];
  for (const key of [...kwargs.keys()].sort()) {
    const val = kwargs.get(key) as PyValue;
    const opt = USERADD_OPTS[key];
    const flag = USERADD_FLAGS[key];
    if (opt !== undefined && typeof val === "string" && val !== "") argv.push(opt, val);
    else if (flag !== undefined && truthy(val)) argv.push(flag);
  }
  argv.push(
    truthy(kwargs.get("no_create_home") ?? null) || truthy(kwargs.get("system") ?? null) ? "-M" : "-m",
  );
  await runTool(m, MODULE, tool(m, argv));
}

/** Distro.lock_passwd: `passwd -l`, or `usermod --lock` without passwd. */
async function lockPasswd(m: Machine, name: string): Promise<void> {
  if (await which(m, "passwd")) await runTool(m, MODULE, tool(m, ["passwd", "-l", name]));
  else if (await which(m, "usermod")) await runTool(m, MODULE, tool(m, ["usermod", "--lock", name]));
  else throw bad(`cannot lock ${shownName(name)}: the machine has neither passwd nor usermod`);
}

/** Python's str.splitlines. */
function splitLines(text: string): string[] {
  const lines = text.split(/\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/);
  if (lines.at(-1) === "") lines.pop();
  return lines;
}

/** Distro.ensure_sudo_dir: /etc/sudoers includes the directory (added when not), mode 0750. */
async function ensureSudoDir(m: Machine, dir: string): Promise<void> {
  const base = await readText(m, SUDOERS);
  const found = splitLines(base ?? "").some((line) => {
    const match = /^[#|@]includedir\s+(.*)$/.exec(line.trim());
    const included = match?.[1]?.trim();
    return included ? posix.resolve("/", included) === dir : false;
  });
  if (!found) {
    const header = cloudInitHeader(m.now(), "added");
    if (base === null) {
      const text = `# See sudoers(5) for more information on "#include" directives:\n\n${header}\n#includedir ${dir}\n`;
      await writeText(m, SUDOERS, text, { mode: 0o440 });
    } else await writeText(m, SUDOERS, `\n${header}\n#includedir ${dir}\n`, { append: true });
  }
  await ensureDir(m, dir, 0o750);
}

/** Distro.write_sudo_rules. */
async function writeSudoRules(m: Machine, name: string, rules: PyValue): Promise<void> {
  const lines = ["", `# User rules for ${name}`];
  const list =
    typeof rules === "string" ? [rules] : Array.isArray(rules) ? (rules as readonly PyValue[]) : null;
  if (list === null) throw bad(`${shownName(name)}: sudo must be a rule or a list of rules`);
  for (const rule of list) {
    const text = pyStr(rule);
    if (text === null) throw bad(`${shownName(name)}: a sudo rule that is not a scalar`);
    lines.push(`${name} ${text}`);
  }
  const content = `${lines.join("\n")}\n`;
  await ensureSudoDir(m, posix.dirname(CI_SUDOERS));
  if (!(await exists(m, CI_SUDOERS))) {
    await writeText(m, CI_SUDOERS, `${cloudInitHeader(m.now(), "created")}\n${content}`, { mode: 0o440 });
  } else await writeText(m, CI_SUDOERS, content, { append: true });
}

export async function applyUsersGroups(plan: UsersGroups, m: Machine): Promise<void> {
  for (const [name, members] of plan.groups) await createGroup(m, name, members);
  for (const [name, config] of plan.users) {
    await addUser(m, name, config);
    if (config.has("lock_passwd") ? truthy(config.get("lock_passwd") as PyValue) : true)
      await lockPasswd(m, name);
    if (config.has("sudo")) {
      const rules = config.get("sudo") as PyValue;
      if (truthy(rules)) await writeSudoRules(m, name, rules);
      else if (rules === false) m.log(`cloud-config: ${MODULE}: sudo: false is deprecated (use null)`);
    }
    if (config.has("ssh_authorized_keys")) await setupUserKeys(m, name, authorizedKeys(name, config));
  }
}

/** create_user's reading of ssh_authorized_keys: one key, a list, or a mapping's values. */
function authorizedKeys(name: string, config: UserConfig): string[] {
  const value = config.get("ssh_authorized_keys") as PyValue;
  if (value === null) throw bad(`${shownName(name)}: ssh_authorized_keys is null`);
  const list =
    typeof value === "string"
      ? [value]
      : isPyMap(value)
        ? [...value.values()]
        : Array.isArray(value)
          ? (value as readonly PyValue[])
          : [];
  const out: string[] = [];
  for (const key of list) {
    const text = pyStr(key);
    if (text === null) throw bad(`${shownName(name)}: an ssh key that is not a string`);
    // cloud-init takes a set (duplicates dropped, its order arbitrary); bootseal keeps the given order.
    if (!out.includes(text)) out.push(text);
  }
  return out;
}

// ssh_util: the authorized_keys file, as cloud-init parses and merges it.
const VALID_KEY_TYPES = new Set([
  "dsa",
  "rsa",
  "ecdsa",
  "ed25519",
  "ecdsa-sha2-nistp256-cert-v01@openssh.com",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384-cert-v01@openssh.com",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521-cert-v01@openssh.com",
  "ecdsa-sha2-nistp521",
  "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
  "sk-ecdsa-sha2-nistp256@openssh.com",
  "sk-ssh-ed25519-cert-v01@openssh.com",
  "sk-ssh-ed25519@openssh.com",
  "ssh-dss-cert-v01@openssh.com",
  "ssh-dss",
  "ssh-ed25519-cert-v01@openssh.com",
  "ssh-ed25519",
  "ssh-rsa-cert-v01@openssh.com",
  "ssh-rsa",
  "ssh-xmss-cert-v01@openssh.com",
  "ssh-xmss@openssh.com",
]);

interface AuthKeyLine {
  readonly source: string;
  readonly keytype?: string;
  readonly base64?: string;
  readonly comment?: string;
  readonly options?: string;
}

const valid = (k: AuthKeyLine): boolean => Boolean(k.base64 && k.keytype);

function keyLineText(k: AuthKeyLine): string {
  const toks = [k.options, k.keytype, k.base64, k.comment].filter((t): t is string => Boolean(t));
  return toks.length === 0 ? k.source : toks.join(" ");
}

/** Python's str.split(None, 2). */
function splitFields(text: string): string[] {
  const out: string[] = [];
  let rest = text.replace(/^\s+/, "");
  while (rest !== "" && out.length < 2) {
    const m = /^(\S+)\s*/.exec(rest) as RegExpExecArray;
    out.push(m[1] as string);
    rest = rest.slice(m[0].length);
  }
  if (rest !== "") out.push(rest);
  return out;
}

function parseKey(ent: string): [string, string, string] | null {
  const toks = splitFields(ent);
  if (toks.length < 2 || !VALID_KEY_TYPES.has(toks[0] as string)) return null;
  return [toks[0] as string, toks[1] as string, toks[2] ?? ""];
}

/** AuthKeyLineParser._extract_options: up to the first blank outside double quotes. */
function extractOptions(ent: string): [string, string] {
  let quoted = false;
  let i = 0;
  while (i < ent.length && (quoted || (ent[i] !== " " && ent[i] !== "\t"))) {
    const c = ent[i];
    if (i + 1 >= ent.length) {
      i++;
      break;
    }
    if (c === "\\" && ent[i + 1] === '"') i++;
    else if (c === '"') quoted = !quoted;
    i++;
  }
  return [ent.slice(0, i), ent.slice(i).replace(/^\s+/, "")];
}

function parseKeyLine(source: string): AuthKeyLine {
  const line = source.replace(/[\r\n]+$/, "");
  if (line.startsWith("#") || line.trim() === "") return { source };
  const ent = line.trim();
  let parsed = parseKey(ent);
  let options: string | undefined;
  if (parsed === null) {
    const [keyopts, remain] = extractOptions(ent);
    options = keyopts;
    parsed = parseKey(remain);
    if (parsed === null) return { source };
  }
  const [keytype, base64, comment] = parsed;
  return { source, keytype, base64, comment, ...(options !== undefined ? { options } : {}) };
}

function mergeKeys(old: AuthKeyLine[], keys: readonly AuthKeyLine[]): string {
  const toAdd = keys.filter(valid);
  const lines = old.map((ent) => {
    if (!valid(ent)) return ent;
    let out = ent;
    for (const k of keys) {
      if (k.base64 === ent.base64) {
        out = k;
        const at = toAdd.indexOf(k);
        if (at !== -1) toAdd.splice(at, 1);
      }
    }
    return out;
  });
  return [...lines, ...toAdd].map(keyLineText).concat([""]).join("\n");
}

/** ssh_util.parse_ssh_config_map of <root>/etc/ssh/sshd_config: lowercased keys, the last wins. */
async function sshdConfig(m: Machine): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const text = await readText(m, "/etc/ssh/sshd_config");
  if (text === null) return out;
  for (const raw of splitLines(text)) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const ws = /^(\S+)\s+([\s\S]*)$/.exec(line);
    const eq = ws ? null : /^([^=]*)=([\s\S]*)$/.exec(line);
    const pair = ws ?? eq;
    if (pair) out.set((pair[1] as string).toLowerCase(), pair[2] as string);
  }
  return out;
}

interface PwEnt {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  readonly home: string;
}

async function pwnam(m: Machine, name: string): Promise<PwEnt> {
  const user = (await accounts(m)).users.get(name);
  if (user === undefined || user.gid === undefined || !user.home)
    throw bad(`no user ${shownName(name)} with a home directory for its ssh keys`);
  return { name, uid: user.id, gid: user.gid, home: user.home };
}

/** ssh_util.check_permissions. */
async function permissionsOk(
  m: Machine,
  user: PwEnt,
  path: string,
  isFile: boolean,
  strict: boolean,
): Promise<boolean> {
  const st = await modeOf(m, path);
  if (st === null) return false;
  const table = await accounts(m);
  const nameOf = (t: typeof table.users, id: number, what: string): string => {
    for (const [n, a] of t) if (a.id === id) return n;
    throw bad(`${displayId(path)} is owned by ${what} ${id}, not in the machine's tables`);
  };
  const owner = nameOf(table.users, st.uid, "uid");
  if (strict && owner !== user.name && owner !== "root") return false;
  let minimal = isFile ? 0o644 : 0o711;
  if (owner === user.name) minimal &= 0o700;
  else {
    const group = nameOf(table.groups, st.gid, "gid");
    const userGroups = [...table.groups].filter(([, g]) => g.members?.includes(user.name)).map(([n]) => n);
    userGroups.push(nameOf(table.groups, user.gid, "gid"));
    minimal &= userGroups.includes(group) ? 0o070 : 0o007;
  }
  if ((st.mode & minimal) === 0) return false;
  return !(strict && (st.mode & 0o022) !== 0);
}

function displayId(path: string): string {
  return JSON.stringify(path.slice(0, 120));
}

/** ssh_util.check_create_path: the directories and the file made with the user's modes. */
async function checkCreatePath(m: Machine, user: PwEnt, filename: string, strict: boolean): Promise<boolean> {
  const root = await pwnam(m, "root");
  const homeFolder = posix.dirname(user.home);
  let parent = "";
  for (const dir of filename.split("/").slice(1, -1)) {
    parent += `/${dir}`;
    const st = await modeOf(m, parent);
    if (st !== null && !(await isDir(m, parent))) return false;
    if (homeFolder.startsWith(parent) || parent === user.home) continue;
    if (st === null) {
      const own = parent.startsWith(user.home);
      await ensureDir(m, parent, own ? 0o700 : 0o755);
      await chownPath(m, parent, own ? user.uid : root.uid, own ? user.gid : root.gid);
    }
    if (!(await permissionsOk(m, user, parent, false, strict))) return false;
  }
  if (await isDir(m, filename)) return false;
  if (!(await exists(m, filename))) {
    await writeText(m, filename, "", { mode: 0o600 });
    await chownPath(m, filename, user.uid, user.gid);
  }
  return permissionsOk(m, user, filename, true, strict);
}

/** ssh_util.setup_user_keys: the keys merged into the user's authorized_keys file. */
async function setupUserKeys(m: Machine, name: string, keys: readonly string[]): Promise<void> {
  const user = await pwnam(m, name);
  const cfg = await sshdConfig(m);
  const keyPaths = cfg.get("authorizedkeysfile") ?? "%h/.ssh/authorized_keys";
  const strict = (cfg.get("strictmodes") ?? "yes") === "yes";
  // render_authorizedkeysfile_paths, zipped with the unrendered names as cloud-init does.
  const raw = keyPaths.split(/\s+/).filter(Boolean);
  const rendered = (keyPaths === "" ? ["%h/.ssh/authorized_keys"] : raw).map((p) => {
    let path = p.replaceAll("%h", user.home).replaceAll("%u", name).replaceAll("%%", "%");
    if (!path.startsWith("/")) path = posix.join(user.home, path);
    return path;
  });
  let chosen = posix.join(user.home, ".ssh", "authorized_keys");
  for (const [i, keyPath] of raw.entries()) {
    const path = rendered[i] as string;
    if (!keyPath.includes("%u") && !keyPath.includes("%h") && !path.startsWith(`${user.home}/`)) continue;
    if (await checkCreatePath(m, user, path, strict)) {
      chosen = path;
      break;
    }
  }
  const existing = (await isDir(m, chosen)) ? null : await readText(m, chosen);
  const old = existing === null ? [] : splitLines(existing).map(parseKeyLine);
  const content = mergeKeys(old, keys.map(parseKeyLine));
  const mode = (await modeOf(m, chosen))?.mode ?? 0o644;
  await writeText(m, chosen, content, { mode });
}
