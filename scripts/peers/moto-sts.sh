# moto server with request authentication on: SigV4 signatures are checked and IAM policies
# applied, as AWS does, for the AWS IAM machine login tests (a request changed after signing
# must be refused by STS). Its own process, so the `moto` peer keeps taking any credentials.
# The set-up spends the three unauthenticated actions moto is started with on an admin user
# (any action allowed) whose access key the env file carries; after that every request must
# be signed with a key moto issued. Same install and pin as moto.sh. Sourced by scripts/peers.sh.
[[ -n "${MOTO_VER:-}" ]] || source "$REPO/scripts/peers/moto.sh"
moto_sts_version() { echo "moto[server]==$MOTO_VER (PyPI; authentication on)"; }
moto_sts_installed() { moto_installed; }
moto_sts_install() { moto_install; }
moto_sts_port_keys() { echo MOTO_STS; } # $MOTO_STS_PORT (scripts/peers.sh, "ports")
moto_sts_start() {
  start_daemon moto-sts env INITIAL_NO_AUTH_ACTION_COUNT=3 "$VENV/bin/moto_server" -H 127.0.0.1 -p "$MOTO_STS_PORT"
}
moto_sts_ready() { [[ "$(http_code "http://127.0.0.1:$MOTO_STS_PORT/moto-api/")" == 200 ]]; }
# One IAM query call within the unauthenticated budget (moto reads the service from the scope).
moto_sts_iam() {
  curl -fsS -X POST "http://127.0.0.1:$MOTO_STS_PORT/" \
    -H 'Authorization: AWS4-HMAC-SHA256 Credential=AKIDSETUP/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0' \
    --data "Version=2010-05-08&$1"
}
moto_sts_setup() {
  local key policy
  policy='%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%7B%22Effect%22%3A%22Allow%22%2C%22Action%22%3A%22*%22%2C%22Resource%22%3A%22*%22%7D%5D%7D'
  moto_sts_iam 'Action=CreateUser&UserName=bootseal-admin' >/dev/null || return 1
  key="$(moto_sts_iam 'Action=CreateAccessKey&UserName=bootseal-admin')" || return 1
  moto_sts_iam "Action=PutUserPolicy&UserName=bootseal-admin&PolicyName=admin&PolicyDocument=$policy" >/dev/null || return 1
  (
    umask 077
    printf '%s\n%s\n' "$(sed -n 's:.*<AccessKeyId>\([^<]*\)</AccessKeyId>.*:\1:p' <<<"$key")" \
      "$(sed -n 's:.*<SecretAccessKey>\([^<]*\)</SecretAccessKey>.*:\1:p' <<<"$key")" >"$DATA/moto-sts/admin-key"
  )
}
moto_sts_env() {
  printf 'export BOOTSEAL_TEST_STS_MOTO_AUTH_ENDPOINT=%q\n' "http://127.0.0.1:$MOTO_STS_PORT"
  if [[ -s "$DATA/moto-sts/admin-key" ]]; then
    printf 'export BOOTSEAL_TEST_STS_MOTO_AUTH_ACCESS_KEY=%q\n' "$(sed -n 1p "$DATA/moto-sts/admin-key")"
    printf 'export BOOTSEAL_TEST_STS_MOTO_AUTH_SECRET_KEY=%q\n' "$(sed -n 2p "$DATA/moto-sts/admin-key")"
  fi
}
