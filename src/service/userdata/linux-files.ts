/**
 * The files a Linux stub (cloud-init or Ignition) writes: one list for both, so the two
 * formats cannot drift apart. Only the token file is secret (mode 0600); a machine that
 * logs in with its cloud identity gets no token file at all. The cloud-init stub downloads
 * the executable with the install script; the Ignition stub has Ignition download it
 * (ignition.ts), so the script is the one file it leaves out.
 */
import { INSTALL_SCRIPT, INSTALL_SCRIPT_PATH } from "./install-script.ts";
import type { CheckedParams } from "./params.ts";
import { DROPIN_DIR, MACHINE_DROPIN, machineDropin, SYSTEMD_UNIT, UNIT_PATH } from "./systemd-unit.ts";

export const TOKEN_PATH = "/etc/bootseal/token";
export const ENV_PATH = "/etc/bootseal/fetch.env";
export const PUBKEY_PATH = "/etc/bootseal/artifact.pub";

export type LinuxFile = {
  readonly path: string;
  readonly content: string;
  /** Octal permission bits, e.g. 0o600. */
  readonly mode: number;
};

/**
 * A value for a systemd EnvironmentFile= between single quotes: systemd takes everything up
 * to the next single quote literally (no escapes, no expansion), so the value must hold
 * neither a single quote nor a line break. Validation guarantees that; this re-checks.
 */
export function systemdEnvValue(value: string): string {
  if (/['\n\r\\]/.test(value) || /[\u0000-\u001f\u007f]/.test(value)) {
    throw new Error("a systemd environment value may not hold a quote, a backslash or a control character");
  }
  return `'${value}'`;
}

/** /etc/bootseal/fetch.env: non-secret settings read by bootseal-fetch.service. */
export function envFile(p: CheckedParams): string {
  const vars: [string, string][] = [
    ["BOOTSEAL_SERVER", p.serviceUrl],
    ["BOOTSEAL_MACHINE", p.machine],
    ["BOOTSEAL_ARTIFACT_URL", p.artifactUrl],
    ["BOOTSEAL_ARTIFACT_SHA256", p.artifactSha256],
    ["BOOTSEAL_ARTIFACT_SIGNATURE_URL", p.signatureUrl],
  ];
  return (
    "# Written by the bootseal user-data stub; read by bootseal-fetch.service. Not secret:\n" +
    "# a bootstrap token, if the machine has one, is in /etc/bootseal/token.\n" +
    vars.map(([k, v]) => `${k}=${systemdEnvValue(v)}\n`).join("")
  );
}

export const MACHINE_DROPIN_PATH = `${DROPIN_DIR}/${MACHINE_DROPIN}`;

export function linuxFiles(p: CheckedParams): LinuxFile[] {
  const files: LinuxFile[] = [];
  if (p.auth.method === "token") files.push({ path: TOKEN_PATH, content: p.auth.token, mode: 0o600 });
  files.push(
    { path: ENV_PATH, content: envFile(p), mode: 0o644 },
    { path: PUBKEY_PATH, content: p.publicKeyPem, mode: 0o644 },
    { path: INSTALL_SCRIPT_PATH, content: INSTALL_SCRIPT, mode: 0o755 },
    { path: UNIT_PATH, content: SYSTEMD_UNIT, mode: 0o644 },
  );
  const dropin = machineDropin(p);
  if (dropin !== null) files.push({ path: MACHINE_DROPIN_PATH, content: dropin, mode: 0o644 });
  return files;
}
