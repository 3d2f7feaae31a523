/**
 * User-data stubs (GET /v1/machines/:ns/:name/userdata?format=...): small, non-secret but
 * for the bootstrap token (none at all for a machine with a cloud identity), they install the bootseal fetcher, check the executable's
 * SHA-256 and Ed25519 signature before it runs, and start it (docs/userdata.md).
 * Pure string generation: no I/O.
 */
import { BootsealError } from "../../errors.ts";
import { renderCloudInit } from "./cloud-init.ts";
import { renderIgnition } from "./ignition.ts";
import type { UserdataFormat, UserdataParams } from "./params.ts";
import { checkParams, USERDATA_FORMATS } from "./params.ts";
import { renderPowerShell } from "./powershell.ts";

export { IGNITION_CLAIMED_VERSIONS, IGNITION_SPEC_VERSION } from "./ignition.ts";
export { INSTALL_SCRIPT, INSTALL_SCRIPT_PATH } from "./install-script.ts";
export { ENV_PATH, PUBKEY_PATH, TOKEN_PATH } from "./linux-files.ts";
export type { CheckedParams, StubAuth, UserdataFormat, UserdataParams } from "./params.ts";
export { checkParams, USERDATA_FORMATS } from "./params.ts";
export {
  BIN_PATH,
  DROPIN_DIR,
  MACHINE_DROPIN,
  SIGNATURE_PATH,
  SYSTEMD_UNIT,
  UNIT_NAME,
  UNIT_PATH,
  VERIFY_DROPIN,
} from "./systemd-unit.ts";

const CONTENT_TYPES: Record<UserdataFormat, string> = {
  "cloud-init": "text/cloud-config; charset=utf-8",
  ignition: "application/vnd.coreos.ignition+json; charset=utf-8",
  powershell: "text/x-powershell; charset=utf-8",
};

export function isUserdataFormat(value: unknown): value is UserdataFormat {
  return typeof value === "string" && (USERDATA_FORMATS as readonly string[]).includes(value);
}

/**
 * Renders the stub of one format. Throws BootsealError("BAD_INPUT") for an unknown format
 * or a param that fails validation; the message never holds the token.
 */
export function renderUserdata(
  format: UserdataFormat,
  params: UserdataParams,
): { contentType: string; body: string } {
  if (!isUserdataFormat(format)) {
    throw new BootsealError("BAD_INPUT", `format: expected one of ${USERDATA_FORMATS.join(", ")}`);
  }
  const p = checkParams(params);
  switch (format) {
    case "cloud-init":
      return { contentType: CONTENT_TYPES[format], body: renderCloudInit(p) };
    case "ignition":
      return { contentType: CONTENT_TYPES[format], body: renderIgnition(p) };
    case "powershell":
      return { contentType: CONTENT_TYPES[format], body: renderPowerShell(p) };
  }
}
