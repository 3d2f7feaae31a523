# bootseal-spiffe-issuer: a SPIFFE bundle endpoint (https_web and https_spiffe) and JWT-SVID
# issuer built from scripts/peers/spiffe-issuer/ on github.com/spiffe/go-spiffe/v2 v2.9.0 (from
# the Go module proxy): go-spiffe's own federation handler serves the bundles. It is not SPIRE
# (SPIRE is not built here: see the program's header). Sourced by scripts/peers.sh.
#
# Built like capi: a private module and build cache, removed afterwards; only the binary stays.
# The stamp beside it holds the hash of the program's source, so a changed source rebuilds.
SPIFFE_MOD=github.com/spiffe/go-spiffe/v2
SPIFFE_VER=v2.9.0
SPIFFE_SRC="$REPO/scripts/peers/spiffe-issuer"
spiffe_source_hash() { cat "$SPIFFE_SRC/go.mod" "$SPIFFE_SRC/go.sum" "$SPIFFE_SRC/main.go" | sha256sum | cut -d' ' -f1; }
spiffe_version() { echo "bootseal-spiffe-issuer on $SPIFFE_MOD $SPIFFE_VER (source $(spiffe_source_hash | cut -c1-12))"; }
spiffe_installed() {
  [[ -x "$C/bin/bootseal-spiffe-issuer" ]] &&
    [[ "$(cat "$C/bin/bootseal-spiffe-issuer.source" 2>/dev/null)" == "$(spiffe_source_hash)" ]] &&
    go version -m "$C/bin/bootseal-spiffe-issuer" 2>/dev/null |
    grep -Eq "^[[:space:]]+dep[[:space:]]+$SPIFFE_MOD[[:space:]]+$SPIFFE_VER([[:space:]]|$)"
}
spiffe_install() {
  mkdir -p "$C/go" "$C/bin"
  local tmp rc=0
  tmp="$(mktemp -d "$C/go/build.XXXXXX")"
  (
    set -e
    export GOPATH="$tmp" GOMODCACHE="$tmp/pkg/mod" GOCACHE="$tmp/cache" GOFLAGS="-modcacherw -buildvcs=false"
    cp -r "$SPIFFE_SRC" "$tmp/src"
    cd "$tmp/src"
    go build -o "$tmp/bootseal-spiffe-issuer" .
    mv "$tmp/bootseal-spiffe-issuer" "$C/bin/"
    spiffe_source_hash >"$C/bin/bootseal-spiffe-issuer.source"
  ) || rc=$?
  rm -rf "$tmp"
  return "$rc"
}
spiffe_port_keys() { echo SPIFFE_WEB SPIFFE_TLS SPIFFE_CONTROL; }
spiffe_start() {
  mkdir -p "$DATA/spiffe"
  start_daemon spiffe "$C/bin/bootseal-spiffe-issuer" -web "127.0.0.1:$SPIFFE_WEB_PORT" \
    -spiffe "127.0.0.1:$SPIFFE_TLS_PORT" -control "127.0.0.1:$SPIFFE_CONTROL_PORT" -dir "$DATA/spiffe" \
    -refresh-hint 2s
}
spiffe_ready() {
  [[ "$(http_code "http://127.0.0.1:$SPIFFE_CONTROL_PORT/healthz")" == 200 ]] &&
    [[ "$(http_code "https://127.0.0.1:$SPIFFE_WEB_PORT/bootseal.test" --cacert "$DATA/spiffe/web-ca.pem")" == 200 ]]
}
spiffe_env() {
  printf 'export BOOTSEAL_TEST_SPIFFE_CONTROL=%q\n' "http://127.0.0.1:$SPIFFE_CONTROL_PORT"
  printf 'export BOOTSEAL_TEST_SPIFFE_WEB_ENDPOINT=%q\n' "https://127.0.0.1:$SPIFFE_WEB_PORT"
  printf 'export BOOTSEAL_TEST_SPIFFE_WEB_CA_FILE=%q\n' "$DATA/spiffe/web-ca.pem"
  printf 'export BOOTSEAL_TEST_SPIFFE_TLS_ENDPOINT=%q\n' "https://127.0.0.1:$SPIFFE_TLS_PORT"
  printf 'export BOOTSEAL_TEST_SPIFFE_BOOTSTRAP_BUNDLE=%q\n' "$DATA/spiffe/bootseal.test.bundle.json"
}
