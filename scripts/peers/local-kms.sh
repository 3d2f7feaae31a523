# local-kms: a second, independent AWS KMS emulator (Go). Sourced by scripts/peers.sh.
# It has no bind-address setting: it listens on every interface (":PORT").
LOCAL_KMS_MOD=github.com/nsmithuk/local-kms
LOCAL_KMS_VER=v0.0.0-20231025161602-e4d9425700fe
local_kms_version() { echo "$LOCAL_KMS_MOD $LOCAL_KMS_VER"; }
local_kms_installed() { go_has local-kms "$LOCAL_KMS_MOD" "$LOCAL_KMS_VER"; }
local_kms_install() { go_install "$LOCAL_KMS_MOD" "$LOCAL_KMS_VER"; }
local_kms_port_keys() { echo LOCAL_KMS; } # $LOCAL_KMS_PORT (scripts/peers.sh, "ports")
local_kms_start() {
  start_daemon local-kms env PORT="$LOCAL_KMS_PORT" KMS_REGION=us-east-1 KMS_ACCOUNT_ID=111122223333 \
    KMS_DATA_PATH="$DATA/local-kms" KMS_SEED_PATH="$DATA/local-kms/no-seed.yaml" "$C/bin/local-kms"
}
local_kms_ready() {
  [[ "$(http_code "http://127.0.0.1:$LOCAL_KMS_PORT/" -X POST -H 'X-Amz-Target: TrentService.ListKeys' \
    -H 'Content-Type: application/x-amz-json-1.1' -d '{}')" == 200 ]]
}
local_kms_env() { printf 'export BOOTSEAL_TEST_KMS_LOCAL_ENDPOINT=%q\n' "http://127.0.0.1:$LOCAL_KMS_PORT"; }
