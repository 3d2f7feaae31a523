/**
 * bootseal.cdx.json: a CycloneDX 1.5 SBOM of what is inside the executables. The npm packages
 * are those esbuild put bytes of into the bundle (its metafile), with the name, version,
 * licence and sha512 integrity package-lock.json records for them; the Node runtime is one
 * component per platform package. Deterministic (the same tree gives the same file): no
 * timestamp, and the serial number is derived from the content.
 */
import { createHash } from "node:crypto";
import type { Metafile } from "esbuild";

interface LockEntry {
  version?: string;
  integrity?: string;
  license?: string;
}

export interface RuntimeComponent {
  nodePackage: string;
  version: string;
  integrity: string;
  purl: string;
}

interface Component {
  type: string;
  "bom-ref": string;
  name: string;
  group?: string;
  version: string;
  purl: string;
  licenses?: { license: { id: string } }[] | { expression: string }[];
  hashes?: { alg: string; content: string }[];
  description?: string;
}

/** The package-lock key of a bundled file's package: `node_modules/a[/node_modules/b]`. */
export function lockKeyOf(input: string): string | undefined {
  const at = input.indexOf("node_modules/");
  if (at === -1) return undefined;
  const parts = input.slice(at).split("/");
  const key: string[] = [];
  for (let i = 0; i < parts.length; ) {
    if (parts[i] !== "node_modules") break;
    const scoped = parts[i + 1]?.startsWith("@") === true;
    const len = scoped ? 3 : 2;
    if (parts.length <= i + len) break; // the package's own directory, no file below it
    key.push(...parts.slice(i, i + len));
    i += len;
  }
  return key.length > 0 ? key.join("/") : undefined;
}

/** The packages with bytes in the bundle, as package-lock keys (sorted, unique). */
export function bundledPackages(metafile: Metafile): string[] {
  const keys = new Set<string>();
  for (const output of Object.values(metafile.outputs)) {
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
      const key = lockKeyOf(input);
      if (key !== undefined && bytesInOutput > 0) keys.add(key);
    }
  }
  return [...keys].sort();
}

function sha512Hex(integrity: string | undefined): { alg: string; content: string }[] {
  const sri = integrity?.split(" ").find((s) => s.startsWith("sha512-"));
  if (sri === undefined) return [];
  return [{ alg: "SHA-512", content: Buffer.from(sri.slice("sha512-".length), "base64").toString("hex") }];
}

/** SPDX ids as ids, anything else ("(MIT OR Apache-2.0)", "SEE LICENSE IN …") as an expression. */
function licenses(license: string | undefined): Component["licenses"] {
  if (license === undefined || license === "") return undefined;
  if (/^[A-Za-z0-9.+-]+$/.test(license)) return [{ license: { id: license } }];
  return [{ expression: license }];
}

function purlOf(name: string, version: string): string {
  return `pkg:npm/${name.replace(/^@/, "%40")}@${version}`;
}

export function sbom(opts: {
  name: string;
  version: string;
  license: string;
  metafile: Metafile;
  lock: { packages: Record<string, LockEntry> };
  runtimes: readonly RuntimeComponent[];
}): string {
  const components: Component[] = [];
  const seen = new Set<string>();
  for (const key of bundledPackages(opts.metafile)) {
    const entry = opts.lock.packages[key];
    if (entry?.version === undefined) throw new Error(`SBOM: ${key} is bundled but not in package-lock.json`);
    const full = key.slice(key.lastIndexOf("node_modules/") + "node_modules/".length);
    const purl = purlOf(full, entry.version);
    if (seen.has(purl)) continue; // the same version nested twice is one component
    seen.add(purl);
    const scope = full.startsWith("@") ? full.slice(0, full.indexOf("/")) : undefined;
    components.push({
      type: "library",
      "bom-ref": purl,
      name: scope === undefined ? full : full.slice(scope.length + 1),
      group: scope,
      version: entry.version,
      purl,
      licenses: licenses(entry.license),
      hashes: sha512Hex(entry.integrity),
    });
  }
  for (const rt of opts.runtimes) {
    components.push({
      type: "platform",
      "bom-ref": rt.purl,
      name: rt.nodePackage,
      version: rt.version,
      purl: rt.purl,
      licenses: licenses("MIT"),
      hashes: sha512Hex(rt.integrity),
      description: "the official Node.js binary the executable is made from (npm platform package)",
    });
  }
  const self = `pkg:npm/${opts.name}@${opts.version}`;
  const body = {
    bomFormat: "CycloneDX",
    specVersion: "1.5",
    version: 1,
    metadata: {
      component: {
        type: "application",
        "bom-ref": self,
        name: opts.name,
        version: opts.version,
        purl: self,
        licenses: licenses(opts.license),
      },
    },
    components,
    dependencies: [{ ref: self, dependsOn: components.map((c) => c["bom-ref"]) }],
  };
  const text = JSON.stringify(body);
  const h = createHash("sha256").update(text).digest("hex");
  // A name-based (v5-shaped) UUID from the content: stable across rebuilds of the same tree.
  const uuid = `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((Number.parseInt(h.slice(16, 18), 16) & 0x3f) | 0x80).toString(16)}${h.slice(18, 20)}-${h.slice(20, 32)}`;
  const { bomFormat, specVersion, ...rest } = body;
  return `${JSON.stringify({ bomFormat, specVersion, serialNumber: `urn:uuid:${uuid}`, ...rest }, null, 2)}\n`;
}
