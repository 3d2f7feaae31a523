# A real age plugin: age-plugin-batchpass from filippo.io/age v1.3.1 (the age module sops 3.13.3
# is built with; Go, from the Go module proxy; CLI only, first install about 40 s). Its identity
# AGE-PLUGIN-BATCHPASS-1… opens scrypt stanzas with $AGE_PASSPHRASE; it has no recipient
# encoding, so a recipient age1batchpass1… is its "recipient encodings not supported" error.
# Installed alone in $C/age-plugins, so a test can put just that directory on PATH.
# Sourced by scripts/peers.sh.
AGE_PLUGIN_BATCHPASS_MOD=filippo.io/age
AGE_PLUGIN_BATCHPASS_VER=v1.3.1
age_plugin_batchpass_version() { echo "$AGE_PLUGIN_BATCHPASS_MOD/cmd/age-plugin-batchpass $AGE_PLUGIN_BATCHPASS_VER"; }
age_plugin_batchpass_installed() {
  [[ -x "$C/age-plugins/age-plugin-batchpass" ]] && go version -m "$C/age-plugins/age-plugin-batchpass" 2>/dev/null |
    grep -Eq "^[[:space:]]+mod[[:space:]]+$AGE_PLUGIN_BATCHPASS_MOD[[:space:]]+$AGE_PLUGIN_BATCHPASS_VER([[:space:]]|$)"
}
age_plugin_batchpass_install() {
  mkdir -p "$C/age-plugins"
  GOBIN="$C/age-plugins" go_install "$AGE_PLUGIN_BATCHPASS_MOD/cmd/age-plugin-batchpass" "$AGE_PLUGIN_BATCHPASS_VER"
}
age_plugin_batchpass_env() { printf 'export BOOTSEAL_TEST_AGE_PLUGIN_DIR=%q\n' "$C/age-plugins"; }
