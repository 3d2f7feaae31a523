# Cluster API itself (sigs.k8s.io/cluster-api, from the Go module proxy): its CRDs, its admission
# webhook manifests, and two of its programs built from source, the core manager (Cluster,
# MachineDeployment, MachineSet, Machine, MachineHealthCheck controllers; `core/main.go`) and the
# kubeadm bootstrap provider (CABPK; `bootstrap/kubeadm/main.go`). `up` starts both against the
# kube peer (scripts/peers/capi-run.ts: CRDs applied, webhooks registered by URL, both managers
# with --watch-filter=$CAPI_WATCH_FILTER). Sourced by scripts/peers.sh.
#
# `go install …@v1.14.2` is refused (its go.mod replaces its own api submodule), so a wrapper
# module requires both modules at the same version and builds both main packages in one run
# (they share most packages). Module and build caches are private and removed afterwards: only
# the two binaries, the CRDs and the webhook manifests stay.
CAPI_MOD=sigs.k8s.io/cluster-api
CAPI_VER=v1.14.2
# Objects a test wants Cluster API's own controllers to reconcile carry this label value
# (cluster.x-k8s.io/watch-filter); everything else is left to the test.
CAPI_WATCH_FILTER=bootseal-e2e
CAPI_CRD_DIRS=(core/config/crd/bases bootstrap/kubeadm/config/crd/bases)
capi_dir() { echo "$C/capi/$CAPI_VER"; }
capi_version() { echo "$CAPI_MOD $CAPI_VER (CRDs, webhooks, core manager, kubeadm bootstrap provider)"; }
capi_installed() {
  [[ "$(cat "$(capi_dir)/VERSION" 2>/dev/null)" == "$CAPI_MOD $CAPI_VER" ]] || return 1
  [[ -s "$(capi_dir)/crds/cluster.x-k8s.io_machines.yaml" && -s "$(capi_dir)/webhooks/kubeadm.yaml" ]] || return 1
  go_has capi-manager "$CAPI_MOD" "$CAPI_VER" && go_has capi-kubeadm-bootstrap-manager "$CAPI_MOD" "$CAPI_VER"
}
capi_install() {
  mkdir -p "$C/go" "$C/bin"
  local tmp rc=0
  tmp="$(mktemp -d "$C/go/build.XXXXXX")"
  (
    set -e
    export GOPATH="$tmp" GOMODCACHE="$tmp/pkg/mod" GOCACHE="$tmp/cache" GOFLAGS="-modcacherw -buildvcs=false"
    mkdir -p "$tmp/wrap"
    cd "$tmp/wrap"
    printf 'module bootseal.test/capi-peer\n\ngo 1.26.0\n\nrequire (\n\t%s %s\n\t%s/api %s\n)\n' \
      "$CAPI_MOD" "$CAPI_VER" "$CAPI_MOD" "$CAPI_VER" >go.mod
    printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "%s/bootstrap/kubeadm"\n\t_ "%s/core"\n)\n' \
      "$CAPI_MOD" "$CAPI_MOD" >tools.go
    go mod tidy
    local src d
    src="$(go list -m -f '{{.Dir}}' "$CAPI_MOD")"
    rm -rf "$(capi_dir)"
    mkdir -p "$(capi_dir)/crds" "$(capi_dir)/webhooks"
    for d in "${CAPI_CRD_DIRS[@]}"; do cp "$src/$d"/*.yaml "$(capi_dir)/crds/"; done
    cp "$src/core/config/webhook/manifests.yaml" "$(capi_dir)/webhooks/core.yaml"
    cp "$src/bootstrap/kubeadm/config/webhook/manifests.yaml" "$(capi_dir)/webhooks/kubeadm.yaml"
    # The binary CABPK builds is named `kubeadm`: renamed, so it is never taken for kubeadm itself.
    go build -o "$tmp/capi-kubeadm-bootstrap-manager" "$CAPI_MOD/bootstrap/kubeadm"
    go build -o "$tmp/capi-manager" "$CAPI_MOD/core"
    mv "$tmp/capi-kubeadm-bootstrap-manager" "$tmp/capi-manager" "$C/bin/"
    printf '%s %s\n' "$CAPI_MOD" "$CAPI_VER" >"$(capi_dir)/VERSION"
  ) || rc=$?
  rm -rf "$tmp"
  return "$rc"
}
capi_port_keys() {
  echo CAPI_CORE_WEBHOOK CAPI_CORE_HEALTH CAPI_CORE_METRICS CAPI_KUBEADM_WEBHOOK CAPI_KUBEADM_HEALTH CAPI_KUBEADM_METRICS
}
# Starts right after the kube peer: capi-run.ts waits for the API server itself.
capi_start() {
  local d="$DATA/capi"
  mkdir -p "$d/certs"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$d/certs/tls.key" -out "$d/certs/tls.crt" \
    >/dev/null 2>&1 || return 1
  start_daemon capi env KUBE_SERVER="https://127.0.0.1:$KUBE_API_PORT" KUBE_CA_FILE="$DATA/kube/serving.crt" \
    KUBE_ADMIN_TOKEN="$KUBE_ADMIN_TOKEN" CAPI_DIR="$(capi_dir)" CAPI_CERT_DIR="$d/certs" \
    CAPI_CORE_BIN="$C/bin/capi-manager" CAPI_KUBEADM_BIN="$C/bin/capi-kubeadm-bootstrap-manager" \
    CAPI_WATCH_FILTER="$CAPI_WATCH_FILTER" \
    CAPI_CORE_WEBHOOK_PORT="$CAPI_CORE_WEBHOOK_PORT" CAPI_CORE_HEALTH_PORT="$CAPI_CORE_HEALTH_PORT" \
    CAPI_CORE_METRICS_PORT="$CAPI_CORE_METRICS_PORT" CAPI_KUBEADM_WEBHOOK_PORT="$CAPI_KUBEADM_WEBHOOK_PORT" \
    CAPI_KUBEADM_HEALTH_PORT="$CAPI_KUBEADM_HEALTH_PORT" CAPI_KUBEADM_METRICS_PORT="$CAPI_KUBEADM_METRICS_PORT" \
    "$REPO/node_modules/.bin/node" "$REPO/scripts/peers/capi-run.ts"
}
capi_ready() {
  [[ "$(http_code "http://127.0.0.1:$CAPI_CORE_HEALTH_PORT/readyz")" == 200 ]] &&
    [[ "$(http_code "http://127.0.0.1:$CAPI_KUBEADM_HEALTH_PORT/readyz")" == 200 ]]
}
capi_env() {
  printf 'export BOOTSEAL_TEST_CAPI_CRDS_DIR=%q\n' "$(capi_dir)/crds"
  printf 'export BOOTSEAL_TEST_CAPI_VERSION=%q\n' "$CAPI_VER"
  printf 'export BOOTSEAL_TEST_CAPI_WATCH_FILTER=%q\n' "$CAPI_WATCH_FILTER"
}
