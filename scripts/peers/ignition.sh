# Ignition itself (Go, built from the Go module proxy at the validator's version): the
# multicall binary of github.com/coreos/ignition/v2/internal, whose `ignition-apply` name runs
# the files stage against a directory (`--root DIR --offline`; it insists on running in a
# container, which it tells by the `container` variable). The differential oracle of the
# fetcher's Ignition payloads (test/fetcher/ignition-oracle.test.ts). Its cgo code needs
# libblkid's headers (Debian libblkid-dev). Sourced by scripts/peers.sh. The same version as
# the validator (ignition-validate.sh), so the oracle and the validator agree on the specs.
IGNITION_APPLY_MOD=github.com/coreos/ignition/v2
IGNITION_APPLY_VER=v2.27.0
ignition_version() { echo "$IGNITION_APPLY_MOD/internal $IGNITION_APPLY_VER (ignition-apply)"; }
ignition_installed() {
  go_has ignition "$IGNITION_APPLY_MOD" "$IGNITION_APPLY_VER" && [[ -L "$C/bin/ignition-apply" ]]
}
ignition_install() {
  [[ -n "$(deb_version libblkid-dev)" ]] || apt_install libblkid-dev pkg-config
  rm -f "$C/bin/internal"
  go_install "$IGNITION_APPLY_MOD/internal" "$IGNITION_APPLY_VER" && mv -f "$C/bin/internal" "$C/bin/ignition" &&
    ln -sfn ignition "$C/bin/ignition-apply"
}
ignition_env() { printf 'export BOOTSEAL_TEST_IGNITION_APPLY_BIN=%q\n' "$C/bin/ignition-apply"; }
