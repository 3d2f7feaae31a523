/**
 * The shape of an Ignition v3 config, per spec minor version (3.0.0 to 3.4.0), from the
 * generated types of coreos/ignition (config/v3_N/types/schema.go): which keys each object
 * has and what type each value is. `checkShape` walks a parsed config against it.
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
  | { readonly list: Shape }
  | { readonly object: Readonly<Record<string, Shape>> };

const str: Shape = "string";
const int: Shape = "integer";
const bool: Shape = "boolean";
const list = (of: Shape): Shape => ({ list: of });
const obj = (fields: Record<string, Shape | undefined>): Shape => {
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

/** The newest supported minor version: where a key unknown to an older spec may come from. */
export const NEWEST_MINOR = 4;

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
function introducedIn(path: readonly string[], key: string, minor: number): number | undefined {
  const unwrap = (s: Shape | undefined): Shape | undefined =>
    s !== undefined && typeof s !== "string" && "list" in s ? unwrap(s.list) : s;
  for (let m = minor + 1; m <= NEWEST_MINOR; m++) {
    let shape: Shape | undefined = configShape(m);
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
export function checkShape(value: unknown, minor: number): void {
  walk(value, configShape(minor), "", [], minor);
}

function walk(value: unknown, shape: Shape, where: string, names: string[], minor: number): void {
  if (value === null) return;
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
      walk(item, shape.list, `${where}[${i}]`, names, minor);
    });
    return;
  }
  if (typeof value !== "object" || Array.isArray(value)) throw bad(where, "must be an object");
  for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
    const sub = shape.object[key];
    const at = where === "" ? key : `${where}.${key}`;
    if (sub === undefined) {
      const later = introducedIn(names, key, minor);
      const hint = later !== undefined ? ` (it came in spec 3.${later}.0)` : "";
      const keys = Object.keys(shape.object).join(", ");
      throw bad(
        where,
        `has the unknown key ${shown(key)} for spec 3.${minor}.0${hint}; the keys are ${keys}`,
      );
    }
    walk(child, sub, at, [...names, key], minor);
  }
}
