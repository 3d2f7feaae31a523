# A second real sops, 3.13.3 (Go, built from the Go module proxy; CLI only), installed as
# $C/bin/sops-3.13.3 next to 3.13.2's `sops`. 3.13.2 has a regression with comments inside YAML
# lists (it fails its own MAC); 3.13.3 is the oracle for those. Sourced by scripts/peers.sh.
SOPS_3_13_3_MOD=github.com/getsops/sops/v3
SOPS_3_13_3_VER=v3.13.3
sops_3_13_3_version() { echo "$SOPS_3_13_3_MOD $SOPS_3_13_3_VER"; }
sops_3_13_3_installed() { go_has sops-3.13.3 "$SOPS_3_13_3_MOD" "$SOPS_3_13_3_VER"; }
# go install names the binary after its package: build into a private GOBIN, then rename.
sops_3_13_3_install() {
  local out rc=0
  mkdir -p "$C/go"
  out="$(mktemp -d "$C/go/bin.XXXXXX")"
  GOBIN="$out" go_install "$SOPS_3_13_3_MOD/cmd/sops" "$SOPS_3_13_3_VER" && mv "$out/sops" "$C/bin/sops-3.13.3" || rc=$?
  rm -rf "$out"
  return "$rc"
}
sops_3_13_3_env() { printf 'export BOOTSEAL_TEST_SOPS_3_13_3_BIN=%q\n' "$C/bin/sops-3.13.3"; }
