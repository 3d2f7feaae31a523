/**
 * The Ignition stub: an Ignition v3 config at spec 3.0.0, the lowest that has everything it
 * uses (storage.files with remote `contents.source` and `verification.hash`, mode, user and
 * group; systemd.units with contents, `enabled` and drop-ins), so Ignition 2.0 and newer read
 * it: every Fedora CoreOS, Flatcar 3185+, RHCOS 4.6+. The test validates it rewritten to every
 * version in IGNITION_CLAIMED_VERSIONS.
 *
 * Ignition downloads the fetcher itself (storage.files, `verification.hash` = the SHA-512
 * pinned here), so there is no download script; the signature comes along as a file and the
 * unit's verify drop-in checks it with OpenSSL before the executable first runs.
 */
import { BootsealError } from "../../errors.ts";
import { INSTALL_SCRIPT_PATH } from "./install-script.ts";
import { linuxFiles } from "./linux-files.ts";
import type { CheckedParams } from "./params.ts";
import {
  BIN_PATH,
  MACHINE_DROPIN,
  machineDropin,
  SIGNATURE_PATH,
  SYSTEMD_UNIT,
  UNIT_NAME,
  VERIFY_DROPIN,
  VERIFY_DROPIN_TEXT,
} from "./systemd-unit.ts";

export const IGNITION_SPEC_VERSION = "3.0.0";
/** Every spec version the stub is valid as (it is written as the first). */
export const IGNITION_CLAIMED_VERSIONS = ["3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0"] as const;

/** RFC 2397 data URL of UTF-8 text, base64: nothing in the text needs escaping. */
export function dataUrl(text: string): string {
  return `data:;base64,${Buffer.from(text, "utf8").toString("base64")}`;
}

type IgnitionFile = {
  path: string;
  mode: number;
  user: { id: number };
  group: { id: number };
  contents: { source: string; verification?: { hash: string } };
};

export function renderIgnition(p: CheckedParams): string {
  if (p.artifactSha512 === undefined) {
    throw new BootsealError("BAD_INPUT", "artifact.sha512: the Ignition stub pins the executable's SHA-512");
  }
  const root = { user: { id: 0 }, group: { id: 0 } };
  const files: IgnitionFile[] = linuxFiles(p)
    .filter((f) => f.path !== INSTALL_SCRIPT_PATH && !f.path.startsWith("/etc/systemd/system/"))
    .map((f) => ({ path: f.path, mode: f.mode, ...root, contents: { source: dataUrl(f.content) } }));
  files.push(
    {
      path: BIN_PATH,
      mode: 0o755,
      ...root,
      contents: { source: p.artifactUrl, verification: { hash: `sha512-${p.artifactSha512}` } },
    },
    { path: SIGNATURE_PATH, mode: 0o644, ...root, contents: { source: p.signatureUrl } },
  );
  const machine = machineDropin(p);
  const dropins = [{ name: VERIFY_DROPIN, contents: VERIFY_DROPIN_TEXT }];
  if (machine !== null) dropins.unshift({ name: MACHINE_DROPIN, contents: machine });
  const config = {
    ignition: { version: IGNITION_SPEC_VERSION },
    storage: { files },
    systemd: { units: [{ name: UNIT_NAME, enabled: true, contents: SYSTEMD_UNIT, dropins }] },
  };
  return JSON.stringify(config, null, 2) + "\n";
}
