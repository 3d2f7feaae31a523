# moto server: S3 + AWS KMS emulator in one process (PyPI moto[server]). Sourced by scripts/peers.sh.
MOTO_VER=5.2.5
moto_version() { echo "moto[server]==$MOTO_VER (PyPI)"; }
moto_installed() { pip_has moto "$MOTO_VER" && [[ -x "$VENV/bin/moto_server" ]] && "$VENV/bin/python" -c 'import flask' 2>/dev/null; }
moto_install() { pip_install "moto[server]==$MOTO_VER"; }
moto_port_keys() { echo MOTO; } # $MOTO_PORT (scripts/peers.sh, "ports")
moto_start() { start_daemon moto "$VENV/bin/moto_server" -H 127.0.0.1 -p "$MOTO_PORT"; }
moto_ready() { [[ "$(http_code "http://127.0.0.1:$MOTO_PORT/moto-api/")" == 200 ]]; }
moto_env() {
  printf 'export BOOTSEAL_TEST_S3_MOTO_ENDPOINT=%q\n' "http://127.0.0.1:$MOTO_PORT"
  printf 'export BOOTSEAL_TEST_KMS_MOTO_ENDPOINT=%q\n' "http://127.0.0.1:$MOTO_PORT"
}
