/**
 * The Ignition stub: an Ignition v3 config (spec 3.4.0, read by Ignition 2.15 and newer:
 * Fedora CoreOS, Flatcar, RHCOS 4.14+) with the same files as the cloud-init stub under
 * storage.files, as base64 data: URLs, and the unit under systemd.units, enabled.
 */
import { linuxFiles } from "./linux-files.ts";
import type { CheckedParams } from "./params.ts";
import { SYSTEMD_UNIT, UNIT_NAME } from "./systemd-unit.ts";

export const IGNITION_SPEC_VERSION = "3.4.0";

/** RFC 2397 data URL of UTF-8 text, base64: nothing in the text needs escaping. */
export function dataUrl(text: string): string {
  return `data:;base64,${Buffer.from(text, "utf8").toString("base64")}`;
}

export function renderIgnition(p: CheckedParams): string {
  const files = linuxFiles(p).filter((f) => !f.path.startsWith("/etc/systemd/system/"));
  const config = {
    ignition: { version: IGNITION_SPEC_VERSION },
    storage: {
      files: files.map((f) => ({
        path: f.path,
        mode: f.mode,
        user: { id: 0 },
        group: { id: 0 },
        contents: { source: dataUrl(f.content) },
      })),
    },
    systemd: {
      units: [{ name: UNIT_NAME, enabled: true, contents: SYSTEMD_UNIT }],
    },
  };
  return JSON.stringify(config, null, 2) + "\n";
}
