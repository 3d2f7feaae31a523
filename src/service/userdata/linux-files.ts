/**
 * The files a Linux stub (cloud-init or Ignition) writes: the same list for both, so the two
 * formats cannot drift apart. Only the token file is secret (mode 0600).
 */
import { INSTALL_SCRIPT, INSTALL_SCRIPT_PATH } from "./install-script.ts";
import type { CheckedParams } from "./params.ts";
import { SYSTEMD_UNIT, UNIT_PATH } from "./systemd-unit.ts";

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
    "# the bootstrap token is in /etc/bootseal/token.\n" +
    vars.map(([k, v]) => `${k}=${systemdEnvValue(v)}\n`).join("")
  );
}

export function linuxFiles(p: CheckedParams): LinuxFile[] {
  return [
    { path: TOKEN_PATH, content: p.bootstrapToken, mode: 0o600 },
    { path: ENV_PATH, content: envFile(p), mode: 0o644 },
    { path: PUBKEY_PATH, content: p.publicKeyPem, mode: 0o644 },
    { path: INSTALL_SCRIPT_PATH, content: INSTALL_SCRIPT, mode: 0o755 },
    { path: UNIT_PATH, content: SYSTEMD_UNIT, mode: 0o644 },
  ];
}
