/**
 * /usr/local/libexec/bootseal-install: the POSIX shell script that bootseal-fetch.service runs
 * as ExecStartPre. It downloads the bootseal executable next to its final place, checks the
 * SHA-256 pinned in the user data and the Ed25519 signature over the executable (OpenSSL 3),
 * and only then makes it executable and renames it into place. Nothing downloaded runs
 * before both checks pass. The text is the same for every machine: its inputs come from
 * /etc/bootseal/fetch.env through the unit's EnvironmentFile=.
 *
 * BOOTSEAL_BIN and BOOTSEAL_ARTIFACT_PUBKEY move the install target and the public key (the
 * tests run the script in a temporary directory); the unit sets neither.
 */
export const INSTALL_SCRIPT_PATH = "/usr/local/libexec/bootseal-install";

export const INSTALL_SCRIPT = `#!/bin/sh
# bootseal-install: download the bootseal executable, check its SHA-256 and its Ed25519
# signature, and only then install it. Written by the bootseal user-data stub; run by
# bootseal-fetch.service (ExecStartPre) with the settings of /etc/bootseal/fetch.env.
set -eu
umask 077

url="\${BOOTSEAL_ARTIFACT_URL:?BOOTSEAL_ARTIFACT_URL is not set}"
sha256="\${BOOTSEAL_ARTIFACT_SHA256:?BOOTSEAL_ARTIFACT_SHA256 is not set}"
sig_url="\${BOOTSEAL_ARTIFACT_SIGNATURE_URL:?BOOTSEAL_ARTIFACT_SIGNATURE_URL is not set}"
pub="\${BOOTSEAL_ARTIFACT_PUBKEY:-/etc/bootseal/artifact.pub}"
bin="\${BOOTSEAL_BIN:-/usr/local/bin/bootseal}"
tmp="$bin.download"
sig="$bin.download.sig"

log() { printf 'bootseal-install: %s\\n' "$*" >&2; }

case "$sha256" in
*[!0-9a-f]*) log "BOOTSEAL_ARTIFACT_SHA256 is not 64 lower-case hex digits"; exit 1 ;;
esac
if [ "\${#sha256}" -ne 64 ]; then
  log "BOOTSEAL_ARTIFACT_SHA256 is not 64 lower-case hex digits"
  exit 1
fi

# Already installed at the pinned hash (a restart or a reboot): nothing to download.
if [ -f "$bin" ] && printf '%s  %s\\n' "$sha256" "$bin" | sha256sum -c --status - 2>/dev/null; then
  log "$bin is installed at the pinned SHA-256"
  exit 0
fi

rm -f -- "$tmp" "$sig"
trap 'rm -f -- "$tmp" "$sig"' EXIT
trap 'exit 1' HUP INT TERM

fetch() {
  curl --fail --silent --show-error --location --proto '=https,http' \\
    --connect-timeout 10 --max-time 600 \\
    --retry 10 --retry-delay 3 --retry-max-time 600 --retry-connrefused \\
    --output "$2" -- "$1"
}

(umask 022 && mkdir -p -- "$(dirname -- "$bin")")
log "downloading the bootseal executable"
fetch "$url" "$tmp"
fetch "$sig_url" "$sig"

# 1. The SHA-256 pinned in the user data.
if ! printf '%s  %s\\n' "$sha256" "$tmp" | sha256sum -c --status -; then
  log "SHA-256 mismatch: the downloaded executable is not the pinned one; refusing to install it"
  exit 1
fi

# 2. The Ed25519 signature, with the public key from the user data.
if ! openssl pkeyutl -verify -pubin -inkey "$pub" -rawin -in "$tmp" -sigfile "$sig" >/dev/null; then
  log "Ed25519 signature check failed; refusing to install the executable"
  exit 1
fi

# 3. Only now: executable, and renamed into place (same directory: an atomic rename).
chmod 0755 -- "$tmp"
mv -f -- "$tmp" "$bin"
log "installed $bin (SHA-256 and signature verified)"
`;
