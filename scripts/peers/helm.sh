# Helm (Go, built from the Go module proxy; CLI only: `helm lint` and `helm template` check the
# chart in deploy/helm/bootseal). Sourced by scripts/peers.sh.
HELM_MOD=helm.sh/helm/v3
HELM_VER=v3.22.0
helm_version() { echo "$HELM_MOD $HELM_VER"; }
helm_installed() { go_has helm "$HELM_MOD" "$HELM_VER"; }
helm_install() { go_install "$HELM_MOD/cmd/helm" "$HELM_VER"; }
helm_env() { printf 'export BOOTSEAL_TEST_HELM_BIN=%q\n' "$C/bin/helm"; }
