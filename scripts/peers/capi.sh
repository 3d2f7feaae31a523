# Cluster API's CRDs (sigs.k8s.io/cluster-api, from the Go module proxy): the core
# cluster.x-k8s.io Cluster, Machine, MachineDeployment and MachineSet and the kubeadm bootstrap
# provider's KubeadmConfig and KubeadmConfigTemplate, installed into the kube peer's API server
# by the controller tests (test/controller/). Nothing runs: the module is downloaded into a
# private module cache, the six CRD files are kept under $C/capi/<version>/crds, the rest is
# removed. Sourced by scripts/peers.sh.
CAPI_MOD=sigs.k8s.io/cluster-api
CAPI_VER=v1.11.3
CAPI_CRDS=(
  config/crd/bases/cluster.x-k8s.io_clusters.yaml
  config/crd/bases/cluster.x-k8s.io_machines.yaml
  config/crd/bases/cluster.x-k8s.io_machinedeployments.yaml
  config/crd/bases/cluster.x-k8s.io_machinesets.yaml
  bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml
  bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml
)
capi_dir() { echo "$C/capi/$CAPI_VER/crds"; }
capi_version() { echo "$CAPI_MOD $CAPI_VER (CRDs)"; }
capi_installed() {
  local f
  [[ "$(cat "$C/capi/$CAPI_VER/VERSION" 2>/dev/null)" == "$CAPI_MOD $CAPI_VER" ]] || return 1
  for f in "${CAPI_CRDS[@]}"; do [[ -s "$(capi_dir)/$(basename "$f")" ]] || return 1; done
}
capi_install() {
  mkdir -p "$C/go"
  local tmp rc=0 dir f
  tmp="$(mktemp -d "$C/go/build.XXXXXX")"
  (
    set -e
    export GOPATH="$tmp" GOMODCACHE="$tmp/pkg/mod" GOCACHE="$tmp/cache" GOFLAGS="-modcacherw"
    cd "$tmp"
    dir="$(go mod download -json "$CAPI_MOD@$CAPI_VER" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [[ -d "$dir" ]]
    rm -rf "$C/capi/$CAPI_VER"
    mkdir -p "$(capi_dir)"
    for f in "${CAPI_CRDS[@]}"; do cp "$dir/$f" "$(capi_dir)/"; done
    printf '%s %s\n' "$CAPI_MOD" "$CAPI_VER" >"$C/capi/$CAPI_VER/VERSION"
  ) || rc=$?
  rm -rf "$tmp"
  return "$rc"
}
capi_env() {
  printf 'export BOOTSEAL_TEST_CAPI_CRDS_DIR=%q\n' "$(capi_dir)"
  printf 'export BOOTSEAL_TEST_CAPI_VERSION=%q\n' "$CAPI_VER"
}
