/**
 * The systemd unit that runs the fetcher at boot. This constant is the one source of truth:
 * deploy/systemd/bootseal-fetch.service is a byte-identical copy (a test checks it), and the
 * cloud-init and Ignition stubs install exactly this text.
 *
 * The unit holds nothing per machine: the server, the machine and the artifact come from
 * /etc/bootseal/fetch.env (written by the stub), so the same file serves every machine.
 * Restart= on a Type=oneshot unit needs systemd 244 or newer.
 */
import { systemdQuoted } from "./escape.ts";
import { authArgs, type CheckedParams } from "./params.ts";

export const UNIT_NAME = "bootseal-fetch.service";
export const UNIT_PATH = `/etc/systemd/system/${UNIT_NAME}`;
export const DROPIN_DIR = `/etc/systemd/system/${UNIT_NAME}.d`;
/** The per-machine drop-in: the fetch command line when it is not the unit's own. */
export const MACHINE_DROPIN = "10-bootseal-machine.conf";
/** Ignition's drop-in: the executable Ignition wrote is checked, not downloaded. */
export const VERIFY_DROPIN = "20-bootseal-verify.conf";
export const BIN_PATH = "/usr/local/bin/bootseal";
export const SIGNATURE_PATH = "/etc/bootseal/bootseal.sig";

// systemd expands these from fetch.env (EnvironmentFile=), not JavaScript.
const FETCH_FROM = `fetch --from \${BOOTSEAL_SERVER}/v1/machines/\${BOOTSEAL_MACHINE}/config`;

export const SYSTEMD_UNIT = `# bootseal-fetch.service: fetches this machine's encrypted bootstrap config from the
# bootseal service, decrypts it with the machine's own identity, writes the files and runs
# the bootstrap command. Installed by the bootseal user-data stubs (docs/userdata.md).
# Per-machine settings are in /etc/bootseal/fetch.env; the bootstrap token is in
# /etc/bootseal/token (mode 0600). A marker file makes a run after success a no-op.
[Unit]
Description=bootseal: fetch and apply this machine's bootstrap config
Wants=network-online.target
After=network-online.target
Before=kubelet.service
ConditionPathExists=/etc/bootseal/fetch.env
StartLimitIntervalSec=30min
StartLimitBurst=6

[Service]
Type=oneshot
RemainAfterExit=yes
EnvironmentFile=/etc/bootseal/fetch.env
# Downloads the bootseal executable, checks its SHA-256 and its Ed25519 signature, and only
# then installs it as /usr/local/bin/bootseal.
ExecStartPre=/usr/local/libexec/bootseal-install
ExecStart=${BIN_PATH} ${FETCH_FROM} --token-file /etc/bootseal/token --apply --root /
Restart=on-failure
RestartSec=20s
TimeoutStartSec=15min
UMask=0077

[Install]
WantedBy=multi-user.target
`;

/**
 * The machine's own fetch command line, or null when it is the unit's (a token, no bootstrap
 * command and no module to skip): a cloud identity replaces `--token-file` with `--auth METHOD`, and the
 * bootstrap command becomes `--exec`, one systemd word (systemdQuoted).
 */
export function machineDropin(p: CheckedParams): string | null {
  if (p.auth.method === "token" && p.command === undefined && p.skipModules.length === 0) return null;
  const auth = p.auth.method === "token" ? "--token-file /etc/bootseal/token" : authArgs(p.auth);
  const skip = p.skipModules.map((name) => ` --skip-module ${name}`).join("");
  const exec = `${skip}${p.command === undefined ? "" : ` --exec ${systemdQuoted(p.command)}`}`;
  return (
    "# Written by the bootseal user-data stub: this machine's fetch command line.\n" +
    "[Service]\n" +
    "ExecStart=\n" +
    `ExecStart=${BIN_PATH} ${FETCH_FROM} ${auth} --apply --root /${exec}\n`
  );
}

/**
 * Ignition wrote the executable itself (storage.files, verification.hash): instead of the
 * install script, the unit checks its Ed25519 signature with OpenSSL before it runs.
 */
export const VERIFY_DROPIN_TEXT = `# Written by the bootseal Ignition stub: Ignition downloaded ${BIN_PATH} and checked its
# SHA-512; its Ed25519 signature is checked here, before it ever runs.
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/openssl pkeyutl -verify -pubin -inkey /etc/bootseal/artifact.pub -rawin -in ${BIN_PATH} -sigfile ${SIGNATURE_PATH}
`;
