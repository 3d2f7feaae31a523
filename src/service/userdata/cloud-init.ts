/**
 * The cloud-init stub: a #cloud-config document with write_files (token 0600, environment
 * file, public key, install script, systemd unit) and runcmd (daemon-reload, enable --now).
 *
 * Serialised with the yaml package in YAML 1.1 mode: cloud-init reads user data with
 * PyYAML (YAML 1.1), where plain scalars such as `yes`, `0x1f` or `0600` are not strings.
 * The 1.1 schema quotes every such string; file contents become block literals.
 */
import { stringify } from "yaml";
import { linuxFiles } from "./linux-files.ts";
import type { CheckedParams } from "./params.ts";
import { UNIT_NAME } from "./systemd-unit.ts";

export const CLOUD_CONFIG_HEADER = "#cloud-config\n";

export function renderCloudInit(p: CheckedParams): string {
  const doc = {
    write_files: linuxFiles(p).map((f) => ({
      path: f.path,
      owner: "root:root",
      permissions: `0${f.mode.toString(8)}`,
      content: f.content,
    })),
    runcmd: [
      ["systemctl", "daemon-reload"],
      ["systemctl", "enable", "--now", UNIT_NAME],
    ],
  };
  const body = stringify(doc, {
    version: "1.1",
    lineWidth: 0,
    blockQuote: "literal",
    indent: 2,
  });
  return (
    CLOUD_CONFIG_HEADER +
    "# bootseal user-data stub: installs and starts bootseal-fetch.service (docs/userdata.md).\n" +
    body
  );
}
