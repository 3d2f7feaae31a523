# FAKE Cloud KMS (gRPC), hand-written in test/fakes/gcp-kms-fake.ts: no real GCP KMS emulator
# installs here (fake-cloud-kms is refused by the Go module proxy; docs/development.md, "Fakes").
# Runs on the repo's pinned Node 24 and its node_modules (@grpc/grpc-js, the .proto files of
# @google-cloud/kms). Sourced by scripts/peers.sh.
GCP_KMS_FAKE_NODE="$REPO/node_modules/.bin/node"
# gcp_kms_fake_pkg NAME : the version of an installed npm package, or "missing".
gcp_kms_fake_pkg() {
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$REPO/node_modules/$1/package.json" 2>/dev/null | head -n 1 | grep . ||
    echo missing
}
gcp_kms_fake_version() {
  echo "fake test/fakes/gcp-kms-fake.ts (@google-cloud/kms $(gcp_kms_fake_pkg @google-cloud/kms) protos, @grpc/grpc-js $(gcp_kms_fake_pkg @grpc/grpc-js), @grpc/proto-loader $(gcp_kms_fake_pkg @grpc/proto-loader))"
}
gcp_kms_fake_installed() {
  [[ -x "$GCP_KMS_FAKE_NODE" && -f "$REPO/test/fakes/gcp-kms-fake.ts" &&
    -f "$REPO/node_modules/@grpc/grpc-js/package.json" && -f "$REPO/node_modules/@grpc/proto-loader/package.json" &&
    -f "$REPO/node_modules/@google-cloud/kms/build/protos/google/cloud/kms/v1/service.proto" ]]
}
gcp_kms_fake_install() {
  echo "gcp-kms-fake runs from the repo's node_modules: run 'npm ci' in $REPO" >&2
  return 1
}
gcp_kms_fake_port_keys() { echo GCP_KMS_FAKE; } # $GCP_KMS_FAKE_PORT (scripts/peers.sh, "ports")
gcp_kms_fake_start() {
  start_daemon gcp-kms-fake "$GCP_KMS_FAKE_NODE" "$REPO/test/fakes/gcp-kms-fake.ts" \
    --listen "127.0.0.1:$GCP_KMS_FAKE_PORT"
}
gcp_kms_fake_ready() { port_busy "$GCP_KMS_FAKE_PORT"; }
gcp_kms_fake_env() { printf 'export BOOTSEAL_TEST_GCP_KMS_ENDPOINT=%q\n' "127.0.0.1:$GCP_KMS_FAKE_PORT"; }
