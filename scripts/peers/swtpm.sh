# swtpm: two software TPM 2.0s (Debian 12 packages swtpm, swtpm-tools 0.7.1; tpm2-tools 5.4
# as the machine's TPM client and the independent implementation the tests cross-check
# with). Each TPM is manufactured by swtpm_setup (`command swtpm_setup`: swtpm_setup here is
# the name of a peer hook) with an RSA and an ECC endorsement key and
# their EK certificates, signed by a local CA of its own (swtpm_localca): TPM "a" is the
# machine, its CA the one a test service trusts; TPM "other" is a second machine whose CA
# nobody trusts (an EK outside the chain; a quote from another TPM). Sourced by scripts/peers.sh.
# First install on a Debian 12 host with fresh apt lists: 14 s.
swtpm_version() { echo "swtpm 0.7.1, swtpm-tools 0.7.1, tpm2-tools 5.4 (Debian 12 packages)"; }
swtpm_installed() {
  [[ "$(deb_version swtpm)" == 0.7.1-* && "$(deb_version swtpm-tools)" == 0.7.1-* &&
    "$(deb_version tpm2-tools)" == 5.4-* ]] && command -v swtpm_setup >/dev/null
}
swtpm_install() { apt_install swtpm swtpm-tools tpm2-tools; }
# Each TPM listens on its port (commands) and port+1 (control), which the port picker keeps free.
swtpm_port_keys() { echo SWTPM_A SWTPM_OTHER; }

# swtpm_manufacture DIR : a fresh TPM state with EKs and EK certificates in DIR/state, the CA
# (its config under DIR/config, XDG_CONFIG_HOME for swtpm_setup) in DIR/config/var/lib/swtpm-localca.
swtpm_manufacture() {
  local d="$1"
  rm -rf "$d" && mkdir -p "$d/state" "$d/config"
  XDG_CONFIG_HOME="$d/config" command swtpm_setup --create-config-files root,skip-if-exist >/dev/null &&
    XDG_CONFIG_HOME="$d/config" command swtpm_setup --tpm2 --tpmstate "$d/state" --create-ek-cert \
      --lock-nvram --overwrite >"$d/manufacture.log" 2>&1
}
swtpm_start_one() { # NAME PORT
  local d="$DATA/$1"
  swtpm_manufacture "$d" || {
    cat "$d/manufacture.log" >&2
    return 1
  }
  start_daemon "$1" swtpm socket --tpm2 --tpmstate "dir=$d/state" --flags startup-clear \
    --server "type=tcp,port=$2,bindaddr=127.0.0.1" --ctrl "type=tcp,port=$(($2 + 1)),bindaddr=127.0.0.1"
}
swtpm_start() {
  swtpm_start_one swtpm-other "$SWTPM_OTHER_PORT" && swtpm_start_one swtpm "$SWTPM_A_PORT" || return 1
  local ca="$DATA/swtpm/config/var/lib/swtpm-localca"
  cat "$ca/issuercert.pem" "$ca/swtpm-localca-rootca-cert.pem" >"$ca/ek-ca-bundle.pem"
}
swtpm_ready() {
  TPM2TOOLS_TCTI="swtpm:host=127.0.0.1,port=$SWTPM_A_PORT" tpm2_getcap properties-fixed >/dev/null &&
    TPM2TOOLS_TCTI="swtpm:host=127.0.0.1,port=$SWTPM_OTHER_PORT" tpm2_getcap properties-fixed >/dev/null
}
swtpm_env() {
  local ca="$DATA/swtpm/config/var/lib/swtpm-localca"
  printf 'export BOOTSEAL_TEST_SWTPM_TCTI=%q\n' "swtpm:host=127.0.0.1,port=$SWTPM_A_PORT"
  printf 'export BOOTSEAL_TEST_SWTPM_OTHER_TCTI=%q\n' "swtpm:host=127.0.0.1,port=$SWTPM_OTHER_PORT"
  # TPM a's EK CA: the issuer and its root, one PEM bundle.
  printf 'export BOOTSEAL_TEST_SWTPM_EK_CA=%q\n' "$ca/ek-ca-bundle.pem"
}
