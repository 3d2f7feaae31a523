/**
 * Ignition spec 2.x configs (2.0.0 to 2.4.0: Flatcar's, and what Cluster API's kubeadm
 * provider emits with `format: ignition`), translated to a spec 3.1.0 config that the v3 path
 * (ignition-config.ts) then checks and applies.
 *
 * Why a translation with these exact rules: Ignition itself no longer reads spec 2; a 2.x
 * config reaches it through ign-converter (coreos/ign-converter's translate/v24tov31, after
 * coreos/ignition's config/v2_N Parse has carried an older config up to 2.4; Flatcar's Ignition
 * runs its fork flatcar/ign-converter the same way). So what a 2.x config means on a machine is
 * what that chain makes of it, and the fetcher must write the same bytes, modes and owners:
 *
 *   - only the `root` filesystem; paths joined to `/` (so cleaned, as Go's path.Join does);
 *   - a file overwrites unless `overwrite: false` (v3's default is the opposite); `append: true`
 *     makes its contents the one append fragment and overwrite false; a file always has a
 *     source (`""` when absent: an empty file);
 *   - 2.0 and 2.1 modes are plain integers, so an absent mode is mode 0 (2.2 made it optional);
 *     2.0 owners are ids only, so an absent owner is uid/gid 0;
 *   - a unit is enabled by `enabled: true` or the older `enable: true`, and disabled by
 *     `enabled: false` (which wins); empty contents are no contents;
 *   - networkd units become 0644 files under /etc/systemd/network (overwriting), drop-ins under
 *     NAME.d, as Flatcar's fork does (upstream ign-converter refuses networkd instead).
 *
 * Refused (by the converter or by the 2.x validation it runs first): a node without a
 * filesystem or with another filesystem than root (UNSUPPORTED: the converter needs a mount
 * path for it), relative paths, `append` with `overwrite: true`, hashes other than sha512,
 * networkd names without .network/.netdev/.link and drop-ins without .conf. Everything the v3
 * path checks after translation (duplicate paths and units, paths under a link, modes, sources,
 * unsupported sections) is refused there, with that path's messages.
 */
import { posix } from "node:path";
import { BootsealError } from "../../errors.ts";

interface V2Owner {
  readonly id?: number;
  readonly name?: string;
}

interface V2Node {
  readonly filesystem?: string;
  readonly path?: string;
  readonly user?: V2Owner;
  readonly group?: V2Owner;
  readonly overwrite?: boolean;
}

interface V2Resource {
  readonly source?: string;
  readonly compression?: string;
  readonly verification?: { readonly hash?: string };
  readonly httpHeaders?: readonly unknown[];
}

interface V2File extends V2Node {
  readonly contents?: V2Resource;
  readonly mode?: number;
  readonly append?: boolean;
}

interface V2Directory extends V2Node {
  readonly mode?: number;
}

interface V2Link extends V2Node {
  readonly target?: string;
  readonly hard?: boolean;
}

interface V2Dropin {
  readonly name?: string;
  readonly contents?: string;
}

interface V2Unit {
  readonly name?: string;
  readonly contents?: string;
  readonly enable?: boolean;
  readonly enabled?: boolean;
  readonly mask?: boolean;
  readonly dropins?: readonly V2Dropin[];
}

/** A 2.x config whose shape checkShape(…, V2_SPECS) has passed, nulls dropped. */
export interface V2Config {
  readonly ignition?: {
    readonly config?: { readonly append?: readonly V2Resource[]; readonly replace?: V2Resource };
    readonly security?: { readonly tls?: { readonly certificateAuthorities?: readonly V2Resource[] } };
    readonly timeouts?: Readonly<Record<string, number>>;
    readonly proxy?: Readonly<Record<string, unknown>>;
  };
  readonly storage?: {
    readonly files?: readonly V2File[];
    readonly directories?: readonly V2Directory[];
    readonly links?: readonly V2Link[];
    readonly filesystems?: readonly { readonly name?: string }[];
    readonly disks?: readonly unknown[];
    readonly raid?: readonly unknown[];
  };
  readonly systemd?: { readonly units?: readonly V2Unit[] };
  readonly networkd?: { readonly units?: readonly V2Unit[] };
  readonly passwd?: { readonly users?: readonly unknown[]; readonly groups?: readonly unknown[] };
}

/** The spec version the translation writes (ign-converter's v24tov31). */
export const TRANSLATED_VERSION = "3.1.0";

/** Where Ignition 2.x wrote networkd units. */
const NETWORKD_DIR = "/etc/systemd/network";
const NETWORKD_TYPES = new Set([".network", ".netdev", ".link"]);

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `ignition config: ${message}`);
}

function unsupported(message: string): BootsealError {
  return new BootsealError("UNSUPPORTED", `ignition config: ${message}`);
}

const shown = (s: string): string => JSON.stringify(s.length > 120 ? `${s.slice(0, 120)}…` : s);

/** Go's path.Join("/", p) for an absolute p: cleaned, no trailing slash. */
function joinRoot(p: string): string {
  const clean = posix.normalize(p);
  return clean.length > 1 && clean.endsWith("/") ? clean.slice(0, -1) : clean;
}

/** Go's url.PathEscape closely enough for a data: URL: every byte but the unreserved ones. */
function dataUrlOf(text: string): string {
  let out = "data:,";
  for (const byte of new TextEncoder().encode(text)) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

function checkNode(n: V2Node, where: string): void {
  if (n.filesystem === undefined || n.filesystem === "") {
    throw bad(`${where}.filesystem is missing (spec 2.x names the filesystem of every entry: root)`);
  }
  if (n.filesystem !== "root") {
    throw unsupported(
      `${where}: the filesystem ${shown(n.filesystem)} is not root; only the root filesystem is applied (ign-converter needs a mount path for any other)`,
    );
  }
  const path = n.path ?? "";
  if (!path.startsWith("/")) throw bad(`${where}: the path ${shown(path)} is not absolute`);
}

function checkHash(res: V2Resource | undefined, where: string): void {
  const hash = res?.verification?.hash;
  if (hash?.includes("-") && !hash.startsWith("sha512-")) {
    throw bad(`${where}.verification.hash: spec 2.x knows sha512 only`);
  }
}

function checkUnitNames(u: V2Unit, where: string): void {
  const name = u.name ?? "";
  if (!NETWORKD_TYPES.has(posix.extname(name))) {
    throw bad(`${where}: ${shown(name)} is not a networkd unit name (.network, .netdev or .link)`);
  }
  (u.dropins ?? []).forEach((d, j) => {
    if (posix.extname(d.name ?? "") !== ".conf")
      throw bad(`${where}.dropins[${j}]: a drop-in name ends in .conf`);
  });
}

/** The 2.x rules the converter's chain enforces before it translates; throws. */
function checkV2(cfg: V2Config): void {
  const storage = cfg.storage ?? {};
  (storage.filesystems ?? []).forEach((fs, i) => {
    if (fs.name !== "root") {
      throw unsupported(
        `storage.filesystems[${i}]: the filesystem ${shown(fs.name ?? "")} is not root; other filesystems are not mounted or formatted by bootseal fetch`,
      );
    }
  });
  for (const [kind, nodes] of [
    ["files", storage.files],
    ["directories", storage.directories],
    ["links", storage.links],
  ] as const) {
    (nodes ?? []).forEach((n: V2Node, i) => {
      checkNode(n, `storage.${kind}[${i}]`);
    });
  }
  (storage.files ?? []).forEach((f, i) => {
    const where = `storage.files[${i}]`;
    if (f.append === true && f.overwrite === true) {
      throw bad(`${where}: append and overwrite cannot both be true (spec 2.x)`);
    }
    checkHash(f.contents, `${where}.contents`);
  });
  const ign = cfg.ignition ?? {};
  (ign.config?.append ?? []).forEach((r, i) => {
    checkHash(r, `ignition.config.append[${i}]`);
  });
  checkHash(ign.config?.replace, "ignition.config.replace");
  (ign.security?.tls?.certificateAuthorities ?? []).forEach((r, i) => {
    checkHash(r, `ignition.security.tls.certificateAuthorities[${i}]`);
  });
  (cfg.networkd?.units ?? []).forEach((u, i) => {
    checkUnitNames(u, `networkd.units[${i}]`);
  });
}

function owner(o: V2Owner | undefined, minor: number): V2Owner {
  // 2.0 had ids only, always set (0 when absent), and carried them up as set ids.
  if (minor === 0) return { id: o?.id ?? 0 };
  return {
    ...(o?.id !== undefined ? { id: o.id } : {}),
    ...(o?.name !== undefined && o.name !== "" ? { name: o.name } : {}),
  };
}

function node(n: V2Node, minor: number): Record<string, unknown> {
  return {
    path: joinRoot(n.path as string),
    user: owner(n.user, minor),
    group: owner(n.group, minor),
    ...(n.overwrite !== undefined ? { overwrite: n.overwrite } : {}),
  };
}

/** 2.0 and 2.1 modes are integers, not optional ones: absent is 0. */
function mode(m: number | undefined, minor: number): { mode?: number } {
  const value = minor <= 1 ? (m ?? 0) : m;
  return value !== undefined ? { mode: value } : {};
}

function resource(r: V2Resource | undefined): Record<string, unknown> {
  return {
    source: r?.source ?? "",
    ...(r?.compression ? { compression: r.compression } : {}),
    ...(r?.verification?.hash !== undefined ? { verification: { hash: r.verification.hash } } : {}),
    ...(r?.httpHeaders?.length ? { httpHeaders: r.httpHeaders } : {}),
  };
}

function translateFile(f: V2File, minor: number): Record<string, unknown> {
  // 2.x files overwrite by default; an appending one must not (spec 3's rule).
  const overwrite = f.append === true ? false : (f.overwrite ?? true);
  const body = f.append === true ? { append: [resource(f.contents)] } : { contents: resource(f.contents) };
  return { ...node(f, minor), overwrite, ...mode(f.mode, minor), ...body };
}

function translateUnit(u: V2Unit): Record<string, unknown> {
  const enabled = u.enabled === false ? false : u.enabled === true || u.enable === true ? true : undefined;
  return {
    name: u.name ?? "",
    ...(enabled !== undefined ? { enabled } : {}),
    ...(u.mask === true ? { mask: true } : {}),
    ...(u.contents ? { contents: u.contents } : {}),
    ...(u.dropins?.length
      ? {
          dropins: u.dropins.map((d) => ({
            name: d.name ?? "",
            ...(d.contents ? { contents: d.contents } : {}),
          })),
        }
      : {}),
  };
}

/** Networkd units as Flatcar's converter writes them: 0644 files that overwrite. */
function networkdFiles(units: readonly V2Unit[]): Record<string, unknown>[] {
  const file = (path: string, text: string) => ({
    path: joinRoot(path),
    user: {},
    group: {},
    overwrite: true,
    mode: 0o644,
    contents: { source: dataUrlOf(text) },
  });
  return units.flatMap((u) => [
    ...(u.contents ? [file(`${NETWORKD_DIR}/${u.name}`, u.contents)] : []),
    ...(u.dropins ?? []).map((d) => file(`${NETWORKD_DIR}/${u.name}.d/${d.name}`, d.contents ?? "")),
  ]);
}

/**
 * The spec 3.1.0 config ign-converter makes of a 2.`minor`.0 config (see the module comment);
 * throws on what the converter refuses. Disks, raid and passwd are carried as they are: the v3
 * path refuses them when they are not empty.
 */
export function translateV2(cfg: V2Config, minor: number): Record<string, unknown> {
  checkV2(cfg);
  const ign = cfg.ignition ?? {};
  const storage = cfg.storage ?? {};
  const replace = ign.config?.replace;
  return {
    ignition: {
      version: TRANSLATED_VERSION,
      config: {
        merge: (ign.config?.append ?? []).map(resource),
        ...(replace !== undefined ? { replace: resource(replace) } : {}),
      },
      security: {
        tls: { certificateAuthorities: (ign.security?.tls?.certificateAuthorities ?? []).map(resource) },
      },
      ...(ign.timeouts !== undefined ? { timeouts: ign.timeouts } : {}),
      ...(ign.proxy !== undefined ? { proxy: ign.proxy } : {}),
    },
    storage: {
      files: [
        ...(storage.files ?? []).map((f) => translateFile(f, minor)),
        ...networkdFiles(cfg.networkd?.units ?? []),
      ],
      directories: (storage.directories ?? []).map((d) => ({ ...node(d, minor), ...mode(d.mode, minor) })),
      links: (storage.links ?? []).map((l) => ({
        ...node(l, minor),
        target: l.target ?? "",
        ...(l.hard === true ? { hard: true } : {}),
      })),
      disks: storage.disks ?? [],
      raid: storage.raid ?? [],
    },
    systemd: { units: (cfg.systemd?.units ?? []).map(translateUnit) },
    passwd: { users: cfg.passwd?.users ?? [], groups: cfg.passwd?.groups ?? [] },
  };
}
