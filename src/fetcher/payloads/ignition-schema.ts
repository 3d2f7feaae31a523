/**
 * The shape of an Ignition config, per spec version (3.0.0 to 3.4.0 from the generated types
 * of coreos/ignition's config/v3_N/types/schema.go; 2.0.0 to 2.4.0 from config/v2_N/types):
 * which keys each object has and what type each value is. `checkShape` walks a parsed config
 * against it.
 *
 * Ignition itself only warns about a key its version does not know ("unused key") and ignores
 * it; the fetcher refuses it instead, naming the key and, when a later spec has it, the version
 * that brought it: a field silently dropped is a file silently not written.
 */
import { BootsealError } from "../../errors.ts";

export type Shape =
  | "string"
  | "integer"
  | "boolean"
  /** Any value: a section refused as a whole when it is not empty. */
  | "any"
  | { readonly list: Shape }
  | { readonly object: Readonly<Record<string, Shape>> };

export const str: Shape = "string";
export const int: Shape = "integer";
export const bool: Shape = "boolean";
export const list = (of: Shape): Shape => ({ list: of });
export const obj = (fields: Record<string, Shape | undefined>): Shape => {
  const out: Record<string, Shape> = {};
  for (const [k, v] of Object.entries(fields)) if (v !== undefined) out[k] = v;
  return { object: out };
};

/** The config's shape under spec 3.`minor`.0. */
export function configShape(minor: number): Shape {
  const since = (m: number, s: Shape): Shape | undefined => (minor >= m ? s : undefined);
  const verification = obj({ hash: str });
  const headers = since(1, list(obj({ name: str, value: str })));
  const resource = obj({ compression: str, source: str, verification, httpHeaders: headers });
  // 3.0 had separate types for config and CA references, without compression.
  const reference = minor === 0 ? obj({ source: str, verification }) : resource;
  const owner = obj({ id: int, name: str });
  const node = { group: owner, overwrite: bool, path: str, user: owner };
  const strings = list(str);
  return obj({
    ignition: obj({
      config: obj({ merge: list(reference), replace: reference }),
      security: obj({ tls: obj({ certificateAuthorities: list(reference) }) }),
      timeouts: obj({ httpResponseHeaders: int, httpTotal: int }),
      version: str,
      proxy: since(1, obj({ httpProxy: str, httpsProxy: str, noProxy: strings })),
    }),
    kernelArguments: since(3, obj({ shouldExist: strings, shouldNotExist: strings })),
    passwd: obj({
      groups: list(
        obj({ gid: int, name: str, passwordHash: str, system: bool, shouldExist: since(2, bool) }),
      ),
      users: list(
        obj({
          gecos: str,
          groups: strings,
          homeDir: str,
          name: str,
          noCreateHome: bool,
          noLogInit: bool,
          noUserGroup: bool,
          passwordHash: str,
          primaryGroup: str,
          sshAuthorizedKeys: strings,
          shell: str,
          system: bool,
          uid: int,
          shouldExist: since(2, bool),
        }),
      ),
    }),
    storage: obj({
      directories: list(obj({ ...node, mode: int })),
      disks: list(
        obj({
          device: str,
          wipeTable: bool,
          partitions: list(
            obj({
              guid: str,
              label: str,
              number: int,
              shouldExist: bool,
              sizeMiB: int,
              startMiB: int,
              typeGuid: str,
              wipePartitionEntry: bool,
              resize: since(2, bool),
            }),
          ),
        }),
      ),
      files: list(obj({ ...node, append: list(resource), contents: resource, mode: int })),
      filesystems: list(
        obj({
          device: str,
          format: str,
          label: str,
          options: strings,
          path: str,
          uuid: str,
          wipeFilesystem: bool,
          mountOptions: since(1, strings),
        }),
      ),
      links: list(obj({ ...node, hard: bool, target: str })),
      luks: since(
        2,
        list(
          obj({
            clevis: obj({
              custom: obj({ config: str, needsNetwork: bool, pin: str }),
              tang: list(obj({ thumbprint: str, url: str, advertisement: since(4, str) })),
              threshold: int,
              tpm2: bool,
            }),
            device: str,
            keyFile: resource,
            label: str,
            name: str,
            options: strings,
            uuid: str,
            wipeVolume: bool,
            discard: since(4, bool),
            openOptions: since(4, strings),
          }),
        ),
      ),
      raid: list(obj({ devices: strings, level: str, name: str, options: strings, spares: int })),
    }),
    systemd: obj({
      units: list(
        obj({
          contents: str,
          dropins: list(obj({ contents: str, name: str })),
          enabled: bool,
          mask: bool,
          name: str,
        }),
      ),
    }),
  });
}

/** One major spec version: its minor versions' shapes, for the checks and their messages. */
export interface SpecFamily {
  readonly major: number;
  /** The newest supported minor version: where a key unknown to an older spec may come from. */
  readonly newestMinor: number;
  readonly shape: (minor: number) => Shape;
}

/** Spec 3.0.0 to 3.4.0. */
export const V3_SPECS: SpecFamily = { major: 3, newestMinor: 4, shape: configShape };

/**
 * A spec 2.`minor`.0 config's shape, from coreos/ignition's config/v2_N/types (the types
 * ign-converter reads). Sections the fetcher refuses whole when they are not empty (disks,
 * raid, passwd, a filesystem's mount) are "any": they are refused, not applied, so their
 * inner keys are not checked.
 */
export function v2ConfigShape(minor: number): Shape {
  const since = (m: number, s: Shape): Shape | undefined => (minor >= m ? s : undefined);
  const verification = obj({ hash: str });
  const headers = since(4, list(obj({ name: str, value: str })));
  const reference = obj({ source: str, verification, httpHeaders: headers });
  const contents = obj({ compression: str, source: str, verification, httpHeaders: headers });
  // 2.0 owners are ids only; 2.1 brought names, 2.2 overwrite.
  const owner = minor === 0 ? obj({ id: int }) : obj({ id: int, name: str });
  const node = { filesystem: str, path: str, user: owner, group: owner, overwrite: since(2, bool) };
  const dropins = list(obj({ contents: str, name: str }));
  return obj({
    ignition: obj({
      version: str,
      config: obj({ append: list(reference), replace: reference }),
      timeouts: since(1, obj({ httpResponseHeaders: int, httpTotal: int })),
      security: since(2, obj({ tls: obj({ certificateAuthorities: list(reference) }) })),
      proxy: since(4, obj({ httpProxy: str, httpsProxy: str, noProxy: list(str) })),
    }),
    storage: obj({
      disks: list("any"),
      raid: list("any"),
      filesystems: list(obj({ name: str, mount: "any", path: str })),
      files: list(obj({ ...node, contents, mode: int, append: since(2, bool) })),
      directories: since(1, list(obj({ ...node, mode: int }))),
      links: since(1, list(obj({ ...node, hard: bool, target: str }))),
    }),
    systemd: obj({
      units: list(
        obj({
          name: str,
          enable: bool,
          enabled: since(1, bool),
          mask: bool,
          contents: str,
          dropins,
        }),
      ),
    }),
    networkd: obj({ units: list(obj({ name: str, contents: str, dropins: since(2, dropins) })) }),
    passwd: obj({ users: list("any"), groups: list("any") }),
  });
}

/** Spec 2.0.0 to 2.4.0 (translated to 3.1.0 by ignition-v2.ts). */
export const V2_SPECS: SpecFamily = { major: 2, newestMinor: 4, shape: v2ConfigShape };

function bad(where: string, message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `ignition config: ${where || "the config"} ${message}`);
}

function shown(key: string): string {
  return JSON.stringify(key.length > 64 ? `${key.slice(0, 64)}…` : key);
}

function typeName(shape: Shape): string {
  if (typeof shape === "string") return shape === "integer" ? "an integer" : `a ${shape}`;
  return "list" in shape ? "a list" : "an object";
}

/** The minor version that first has this key at this place, if any (for the message). */
function introducedIn(
  path: readonly string[],
  key: string,
  minor: number,
  family: SpecFamily,
): number | undefined {
  const unwrap = (s: Shape | undefined): Shape | undefined =>
    s !== undefined && typeof s !== "string" && "list" in s ? unwrap(s.list) : s;
  for (let m = minor + 1; m <= family.newestMinor; m++) {
    let shape: Shape | undefined = family.shape(m);
    for (const seg of path) {
      shape = unwrap(shape);
      shape =
        shape !== undefined && typeof shape !== "string" && "object" in shape ? shape.object[seg] : undefined;
    }
    shape = unwrap(shape);
    if (shape !== undefined && typeof shape !== "string" && "object" in shape && key in shape.object)
      return m;
  }
  return undefined;
}

/**
 * Checks `value` against `shape`: unknown keys and wrong types are BAD_INPUT naming the place
 * (`storage.files[2].mode`). A null value counts as absent, as Go's decoder takes it.
 */
export function checkShape(value: unknown, minor: number, family: SpecFamily = V3_SPECS): void {
  walk(value, family.shape(minor), "", [], minor, family);
}

function walk(
  value: unknown,
  shape: Shape,
  where: string,
  names: string[],
  minor: number,
  family: SpecFamily,
): void {
  if (value === null || shape === "any") return;
  if (shape === "string" || shape === "integer" || shape === "boolean") {
    const ok =
      shape === "string"
        ? typeof value === "string"
        : shape === "boolean"
          ? typeof value === "boolean"
          : typeof value === "number" && Number.isSafeInteger(value);
    if (!ok) throw bad(where, `must be ${typeName(shape)}`);
    return;
  }
  if ("list" in shape) {
    if (!Array.isArray(value)) throw bad(where, "must be a list");
    value.forEach((item, i) => {
      walk(item, shape.list, `${where}[${i}]`, names, minor, family);
    });
    return;
  }
  if (typeof value !== "object" || Array.isArray(value)) throw bad(where, "must be an object");
  for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
    const sub = shape.object[key];
    const at = where === "" ? key : `${where}.${key}`;
    if (sub === undefined) {
      const later = introducedIn(names, key, minor, family);
      const hint = later !== undefined ? ` (it came in spec ${family.major}.${later}.0)` : "";
      const keys = Object.keys(shape.object).join(", ");
      throw bad(
        where,
        `has the unknown key ${shown(key)} for spec ${family.major}.${minor}.0${hint}; the keys are ${keys}`,
      );
    }
    walk(child, sub, at, [...names, key], minor, family);
  }
}
