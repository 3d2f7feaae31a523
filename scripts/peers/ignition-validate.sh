# Ignition's config validator (Go, built from the Go module proxy; CLI only: `validate FILE`
# checks the Ignition user-data stub). go install names the binary `validate`; it is renamed
# to ignition-validate in the cache. Sourced by scripts/peers.sh.
IGNITION_MOD=github.com/coreos/ignition/v2
IGNITION_VER=v2.27.0
ignition_validate_version() { echo "$IGNITION_MOD/validate $IGNITION_VER"; }
ignition_validate_installed() { go_has ignition-validate "$IGNITION_MOD" "$IGNITION_VER"; }
ignition_validate_install() {
  rm -f "$C/bin/validate"
  go_install "$IGNITION_MOD/validate" "$IGNITION_VER" && mv -f "$C/bin/validate" "$C/bin/ignition-validate"
}
ignition_validate_env() { printf 'export BOOTSEAL_TEST_IGNITION_VALIDATE_BIN=%q\n' "$C/bin/ignition-validate"; }
