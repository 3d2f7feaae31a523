/**
 * Reading an Ignition config: JSON, the spec version (3.0.0 to 3.4.0; 2.0.0 to 2.4.0 are
 * translated to 3.1.0 first, ignition-v2.ts), the shape of that version (ignition-schema.ts),
 * Ignition's own validation rules (config/v3_N/types: clean
 * absolute paths, modes, overwrite without a source, compression, hashes, unit and drop-in
 * names, one entry per path, nothing under a link, no storage entry on a unit's path), and the
 * sections a fetcher running after boot cannot apply (passwd, disks, raid, filesystems, luks,
 * kernel arguments, merged or replacing configs, extra CAs), refused by name. Spec faults are
 * BAD_INPUT; valid configs this fetcher does not apply are UNSUPPORTED.
 */
import { posix } from "node:path";
import { BootsealError } from "../../errors.ts";
import { checkHashForm, checkSource, type Resource } from "./ignition-content.ts";
import { checkShape, V2_SPECS } from "./ignition-schema.ts";
import { translateV2, type V2Config } from "./ignition-v2.ts";

export interface Owner {
  readonly id?: number;
  readonly name?: string;
}

export interface NodeEntry {
  readonly path: string;
  readonly overwrite?: boolean;
  readonly user?: Owner;
  readonly group?: Owner;
}

export interface FileEntry extends NodeEntry {
  readonly contents?: Resource;
  readonly append?: readonly Resource[];
  readonly mode?: number;
}

export interface DirectoryEntry extends NodeEntry {
  readonly mode?: number;
}

export interface LinkEntry extends NodeEntry {
  readonly target: string;
  readonly hard?: boolean;
}

export interface Dropin {
  readonly name: string;
  readonly contents?: string;
}

export interface Unit {
  readonly name: string;
  readonly contents?: string;
  readonly enabled?: boolean;
  readonly mask?: boolean;
  readonly dropins?: readonly Dropin[];
}

export interface IgnitionConfig {
  readonly version: string;
  readonly files: readonly FileEntry[];
  readonly directories: readonly DirectoryEntry[];
  readonly links: readonly LinkEntry[];
  readonly units: readonly Unit[];
}

/** Where systemd units go, as Ignition writes them. */
export const SYSTEMD_DIR = "/etc/systemd/system";

const UNIT_TYPES = new Set([
  ".service",
  ".socket",
  ".device",
  ".mount",
  ".automount",
  ".swap",
  ".target",
  ".path",
  ".timer",
  ".snapshot",
  ".slice",
  ".scope",
]);

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `ignition config: ${message}`);
}

function unsupported(message: string): BootsealError {
  return new BootsealError("UNSUPPORTED", `ignition config: ${message}`);
}

function shownPath(p: string): string {
  return JSON.stringify(p.length > 120 ? `${p.slice(0, 120)}…` : p);
}

/** Drops null values, as Go's decoder leaves a field absent for null. */
function clean(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(clean);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== null) out[k] = clean(v);
    return out;
  }
  return value;
}

/** The parsed JSON object, or null when the bytes are not a JSON object. */
export function parseJsonObject(payload: Uint8Array): Record<string, unknown> | null {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(payload);
  } catch {
    return null;
  }
  if (!/^\s*\{/.test(text)) return null;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

/** The spec versions applied, for messages. */
const APPLIED = "2.0.0 to 2.4.0 and 3.0.0 to 3.4.0";

export interface SpecVersion {
  readonly major: 2 | 3;
  readonly minor: number;
}

/** A supported spec version; throws naming the version otherwise. */
export function specVersion(version: unknown): SpecVersion {
  if (typeof version !== "string") throw bad(`ignition.version is missing (it must be ${APPLIED})`);
  const m = /^([23])\.([0-4])\.0$/.exec(version);
  if (m) return { major: m[1] === "2" ? 2 : 3, minor: Number(m[2]) };
  const shown = JSON.stringify(version.slice(0, 40));
  if (/^1\./.test(version)) {
    throw unsupported(`spec ${shown} is Ignition v1, which bootseal does not apply (${APPLIED})`);
  }
  if (version.endsWith("-experimental")) {
    // Ignition accepts only its newest experimental spec, ign-converter none.
    throw bad(`spec ${shown} is an experimental spec (${APPLIED} are applied)`);
  }
  if (/^[23]\.\d+\.\d+$/.test(version)) {
    throw unsupported(`spec ${shown} is not supported (${APPLIED})`);
  }
  throw bad(`ignition.version ${shown} is not a spec version (${APPLIED})`);
}

function checkPath(p: string, where: string): void {
  if (p === "") throw bad(`${where}.path is missing`);
  if (!p.startsWith("/")) throw bad(`${where}: the path ${shownPath(p)} is not absolute`);
  if (posix.normalize(p) !== p || (p.length > 1 && p.endsWith("/"))) {
    throw bad(`${where}: the path ${shownPath(p)} is not clean (no //, ., .. or trailing /)`);
  }
}

function checkOwner(o: Owner | undefined, where: string): void {
  if (o?.id !== undefined && o.name !== undefined && o.name !== "") {
    throw bad(`${where}: give the id or the name, not both`);
  }
}

function checkMode(mode: number | undefined, where: string): void {
  if (mode !== undefined && (mode < 0 || mode > 0o7777)) {
    throw bad(`${where}.mode ${mode} is not a mode (decimal 0 to 4095, e.g. 420 for 0644)`);
  }
}

function checkResource(res: Resource, where: string): void {
  if (res.compression !== undefined && res.compression !== "" && res.compression !== "gzip") {
    throw bad(`${where}.compression must be gzip or empty`);
  }
  const hash = res.verification?.hash;
  if (hash !== undefined && res.source === undefined) throw bad(`${where}: verification.hash needs a source`);
  if (hash !== undefined) checkHashForm(hash, where);
  if ((res as { httpHeaders?: unknown[] }).httpHeaders?.length) {
    throw bad(`${where}: httpHeaders go with http and https sources only`);
  }
  if (res.source !== undefined) checkSource(res.source, where);
}

/** A config whose shape checkShape has passed (nulls dropped). */
interface RawConfig {
  readonly ignition?: {
    readonly config?: { readonly merge?: unknown; readonly replace?: unknown };
    readonly security?: { readonly tls?: { readonly certificateAuthorities?: unknown } };
  };
  readonly storage?: {
    readonly files?: FileEntry[];
    readonly directories?: DirectoryEntry[];
    readonly links?: LinkEntry[];
    readonly disks?: unknown;
    readonly raid?: unknown;
    readonly filesystems?: unknown;
    readonly luks?: unknown;
  };
  readonly systemd?: { readonly units?: Unit[] };
  readonly passwd?: { readonly users?: unknown; readonly groups?: unknown };
  readonly kernelArguments?: unknown;
}

function nonEmpty(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (value !== null && typeof value === "object") return Object.values(value).some(nonEmpty);
  return value !== undefined;
}

/** Sections a post-boot fetcher cannot apply: refused when they ask for anything. */
function refuseUnsupported(cfg: RawConfig): void {
  const storage = cfg.storage ?? {};
  for (const s of ["disks", "raid", "filesystems", "luks"] as const) {
    if (nonEmpty(storage[s])) {
      throw unsupported(
        `storage.${s}: a fetcher running after boot does not partition or format (empty lists are fine)`,
      );
    }
  }
  if (nonEmpty(cfg.passwd?.users) || nonEmpty(cfg.passwd?.groups)) {
    throw unsupported("passwd: users and groups are not created by bootseal fetch (use a file or a unit)");
  }
  if (nonEmpty(cfg.kernelArguments)) {
    throw unsupported("kernelArguments: a fetcher running after boot cannot change the kernel command line");
  }
  const ign = cfg.ignition ?? {};
  if (nonEmpty(ign.config?.merge) || nonEmpty(ign.config?.replace)) {
    throw unsupported("ignition.config: merged or replacing configs are not fetched by bootseal fetch");
  }
  if (nonEmpty(ign.security?.tls?.certificateAuthorities)) {
    throw unsupported(
      "ignition.security.tls: extra CAs are only for remote sources, which bootseal fetch does not fetch",
    );
  }
}

function checkSpecRules(cfg: RawConfig): void {
  const storage = cfg.storage ?? {};
  const paths = new Map<string, string>();
  const links: LinkEntry[] = storage.links ?? [];
  const directories: DirectoryEntry[] = storage.directories ?? [];
  for (const [kind, entries] of [
    ["files", storage.files ?? []],
    ["directories", directories],
    ["links", links],
  ] as const) {
    (entries as NodeEntry[]).forEach((n, i) => {
      const where = `storage.${kind}[${i}]`;
      checkPath(n.path ?? "", where);
      const earlier = paths.get(n.path);
      if (earlier !== undefined) throw bad(`${where}: the path ${shownPath(n.path)} is also ${earlier}`);
      paths.set(n.path, where);
      checkOwner(n.user, `${where}.user`);
      checkOwner(n.group, `${where}.group`);
      for (const l of links) {
        if (n.path.startsWith(`${l.path}/`))
          throw bad(`${where}: ${shownPath(n.path)} lies under the link ${shownPath(l.path)}`);
      }
    });
  }
  (storage.files ?? []).forEach((f: FileEntry, i: number) => {
    const where = `storage.files[${i}]`;
    checkMode(f.mode, where);
    if (f.overwrite === true && f.contents?.source === undefined) {
      throw bad(`${where}: overwrite is true but contents has no source`);
    }
    if (f.contents !== undefined) checkResource(f.contents, `${where}.contents`);
    (f.append ?? []).forEach((a, j) => {
      checkResource(a, `${where}.append[${j}]`);
    });
  });
  directories.forEach((d, i) => {
    checkMode(d.mode, `storage.directories[${i}]`);
  });
  links.forEach((l, i) => {
    const where = `storage.links[${i}]`;
    if (l.target === undefined || l.target === "") throw bad(`${where}.target is missing`);
    if (l.hard === true) {
      const target = l.target.startsWith("/") ? posix.normalize(l.target) : posix.join(l.path, l.target);
      if (directories.some((d) => d.path === target))
        throw bad(`${where}: a hard link cannot point to a directory`);
    }
  });
  const unitPaths = new Set<string>();
  const names = new Set<string>();
  (cfg.systemd?.units ?? []).forEach((u: Unit, i: number) => {
    const where = `systemd.units[${i}]`;
    if (u.name === undefined || u.name === "") throw bad(`${where}.name is missing`);
    if (names.has(u.name)) throw bad(`${where}: the unit ${JSON.stringify(u.name)} is listed twice`);
    names.add(u.name);
    if (!UNIT_TYPES.has(posix.extname(u.name)) || u.name.includes("/")) {
      throw bad(
        `${where}: ${JSON.stringify(u.name)} is not a unit name with a unit type (.service, .timer, …)`,
      );
    }
    if (u.contents) unitPaths.add(`${SYSTEMD_DIR}/${u.name}`);
    const dropins = new Set<string>();
    (u.dropins ?? []).forEach((d, j) => {
      if (d.name === undefined || posix.extname(d.name) !== ".conf" || d.name.includes("/")) {
        throw bad(`${where}.dropins[${j}]: a drop-in name ends in .conf`);
      }
      if (dropins.has(d.name))
        throw bad(`${where}.dropins[${j}]: the drop-in ${JSON.stringify(d.name)} is listed twice`);
      dropins.add(d.name);
      if (d.contents) unitPaths.add(`${SYSTEMD_DIR}/${u.name}.d/${d.name}`);
    });
  });
  for (const [path, where] of paths) {
    if (unitPaths.has(path)) throw bad(`${where}: ${shownPath(path)} is also a systemd unit of the config`);
  }
}

/**
 * Reads and checks a whole Ignition config; throws before anything is written: BAD_INPUT for a
 * config Ignition would refuse (or whose unknown key Ignition would ignore), UNSUPPORTED for a
 * valid one that asks for something a post-boot fetcher does not do.
 */
export function parseIgnitionConfig(payload: Uint8Array): IgnitionConfig {
  const raw = parseJsonObject(payload);
  if (raw === null) throw bad("not a JSON object");
  const ignition = raw.ignition;
  const version =
    ignition !== null && typeof ignition === "object"
      ? (ignition as Record<string, unknown>).version
      : undefined;
  const spec = specVersion(version);
  checkShape(raw, spec.minor, spec.major === 2 ? V2_SPECS : undefined);
  // A 2.x config is checked against its own spec, then as the 3.1.0 config it translates to.
  const cfg = (spec.major === 2 ? translateV2(clean(raw) as V2Config, spec.minor) : clean(raw)) as RawConfig;
  checkSpecRules(cfg);
  refuseUnsupported(cfg);
  return {
    version: version as string,
    files: cfg.storage?.files ?? [],
    directories: cfg.storage?.directories ?? [],
    links: cfg.storage?.links ?? [],
    units: cfg.systemd?.units ?? [],
  };
}
