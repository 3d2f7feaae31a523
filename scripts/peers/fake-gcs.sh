# fake-gcs-server: Google Cloud Storage emulator (Go). Sourced by scripts/peers.sh.
FAKE_GCS_MOD=github.com/fsouza/fake-gcs-server
FAKE_GCS_VER=v1.55.1
fake_gcs_version() { echo "$FAKE_GCS_MOD $FAKE_GCS_VER"; }
fake_gcs_installed() { go_has fake-gcs-server "$FAKE_GCS_MOD" "$FAKE_GCS_VER"; }
fake_gcs_install() { go_install "$FAKE_GCS_MOD" "$FAKE_GCS_VER"; }
fake_gcs_port_keys() { echo FAKE_GCS; } # $FAKE_GCS_PORT (scripts/peers.sh, "ports")
fake_gcs_start() {
  start_daemon fake-gcs "$C/bin/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$FAKE_GCS_PORT" \
    -backend filesystem -filesystem-root "$DATA/fake-gcs" -external-url "http://127.0.0.1:$FAKE_GCS_PORT" \
    -public-host "127.0.0.1:$FAKE_GCS_PORT" -log-level warn
}
fake_gcs_ready() { [[ "$(http_code "http://127.0.0.1:$FAKE_GCS_PORT/storage/v1/b")" == 200 ]]; }
fake_gcs_env() { printf 'export BOOTSEAL_TEST_GCS_ENDPOINT=%q\n' "http://127.0.0.1:$FAKE_GCS_PORT"; }
