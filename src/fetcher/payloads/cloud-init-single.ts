/**
 * The cloud-config modules bootseal hands to the machine's own cloud-init instead of applying
 * them itself: `disk_setup` (with `fs_setup` and `device_aliases`) and `mounts` (with
 * `mount_default_fields` and `swap`). They partition, format, mount and make swap from probes
 * of the machine's disks and its datasource (ephemeral device names, the datasource's own
 * layouts, `overwrite`/`replace_fs` checks, swap sized from memory); only cloud-init's code does
 * that exactly as cloud-init 22.4 does. bootseal writes the module's keys to a private file and
 * runs `cloud-init single --name MODULE --frequency always --file FILE` through the command
 * runner: a `--file` config overrides every other config cloud-init merges (cmd/main.py), as the
 * user-data's own keys would.
 *
 * The file is YAML that PyYAML reads back as the values bootseal read (flow style, every string
 * double-quoted with escapes, floats tagged, `!!binary` kept).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BootsealError } from "../../errors.ts";
import { type CloudCommand, HANDED_MODULES } from "./cloud-config-parse.ts";
import { type PyValue, pyFloat } from "./cloud-init-values.ts";
import type { CommandRunner } from "./commands.ts";

/** The command cloud-init is run as (found on the machine's PATH). */
export const CLOUD_INIT = "cloud-init";

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `cloud-config: ${message}`);
}

/** A YAML double-quoted scalar PyYAML reads back as this exact str (code points escaped). */
function quoted(text: string): string {
  let out = '"';
  for (let i = 0; i < text.length; ) {
    const cp = text.codePointAt(i) as number;
    i += cp > 0xffff ? 2 : 1;
    if (cp === 0x22 || cp === 0x5c) out += `\\${String.fromCodePoint(cp)}`;
    else if (cp >= 0x20 && cp <= 0x7e) out += String.fromCodePoint(cp);
    else if (cp <= 0xff) out += `\\x${cp.toString(16).padStart(2, "0")}`;
    else if (cp <= 0xffff) out += `\\u${cp.toString(16).padStart(4, "0")}`;
    else out += `\\U${cp.toString(16).padStart(8, "0")}`;
  }
  return `${out}"`;
}

/** YAML (flow style) that PyYAML's safe loader reads as the same Python value. */
export function pyYaml(value: PyValue, where: string): string {
  if (value === null) return "null";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number") {
    if (Number.isNaN(value)) return ".nan";
    if (!Number.isFinite(value)) return value > 0 ? ".inf" : "-.inf";
    return `!!float ${quoted(pyFloat(value))}`;
  }
  if (typeof value === "string") return quoted(value);
  if (value instanceof Uint8Array) return `!!binary ${quoted(Buffer.from(value).toString("base64"))}`;
  if (value instanceof Date) throw bad(`${where}: a YAML timestamp is not passed on to cloud-init`);
  if (Array.isArray(value)) return `[${value.map((v) => pyYaml(v, where)).join(", ")}]`;
  const map = value as ReadonlyMap<unknown, PyValue>;
  return `{${[...map].map(([k, v]) => `${pyYaml(k as PyValue, where)}: ${pyYaml(v, where)}`).join(", ")}}`;
}

/** The config file handed to cloud-init: one `key: value` line per handed key. */
export function handedConfig(keys: ReadonlyMap<string, PyValue>): string {
  return [...keys].map(([k, v]) => `${k}: ${pyYaml(v, k)}\n`).join("");
}

/** The `cloud-init single` runs for the modules whose keys the config has, in cloud-init's order. */
export function handedCommands(
  keys: ReadonlyMap<string, PyValue>,
  file: string,
): { readonly module: string; readonly command: CloudCommand }[] {
  return HANDED_MODULES.filter((m) => m.keys.some((k) => keys.has(k))).map((m) => ({
    module: m.name,
    command: { argv: [CLOUD_INIT, "single", "--name", m.name, "--frequency", "always", "--file", file] },
  }));
}

/**
 * Runs the handed modules (nothing when the config has none of their keys); the file lives in
 * a private temporary directory for the duration of the runs.
 */
export async function runHandedModules(
  keys: ReadonlyMap<string, PyValue>,
  run: CommandRunner,
): Promise<void> {
  if (keys.size === 0) return;
  const text = handedConfig(keys);
  const dir = await mkdtemp(join(tmpdir(), "bootseal-cloud-init-"));
  try {
    const file = join(dir, "cloud-config.yaml");
    await writeFile(file, text, { mode: 0o600 });
    for (const { module, command } of handedCommands(keys, file)) await run(module, [command]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
