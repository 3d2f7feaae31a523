/**
 * The systemd unit that runs the fetcher at boot. This constant is the one source of truth:
 * deploy/systemd/bootseal-fetch.service is a byte-identical copy (a test checks it), and the
 * cloud-init and Ignition stubs install exactly this text.
 *
 * The unit holds nothing per machine: the server, the machine and the artifact come from
 * /etc/bootseal/fetch.env (written by the stub), so the same file serves every machine.
 * Restart= on a Type=oneshot unit needs systemd 244 or newer.
 */
export const UNIT_NAME = "bootseal-fetch.service";
export const UNIT_PATH = `/etc/systemd/system/${UNIT_NAME}`;

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
ExecStart=/usr/local/bin/bootseal fetch --from \${BOOTSEAL_SERVER}/v1/machines/\${BOOTSEAL_MACHINE}/config --token-file /etc/bootseal/token --apply --root /
Restart=on-failure
RestartSec=20s
TimeoutStartSec=15min
UMask=0077

[Install]
WantedBy=multi-user.target
`;
