# The real sops (Go, built from the Go module proxy; CLI only). Sourced by scripts/peers.sh.
SOPS_MOD=github.com/getsops/sops/v3
SOPS_VER=v3.13.2
sops_version() { echo "$SOPS_MOD $SOPS_VER"; }
sops_installed() { go_has sops "$SOPS_MOD" "$SOPS_VER"; }
sops_install() { go_install "$SOPS_MOD/cmd/sops" "$SOPS_VER"; }
sops_env() { printf 'export BOOTSEAL_TEST_SOPS_BIN=%q\n' "$C/bin/sops"; }
