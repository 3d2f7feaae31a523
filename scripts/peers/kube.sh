# A Kubernetes API server (kube-apiserver) with its etcd, for the controllers' TokenReview path
# (docs/security.md, "Controllers"). Both are Go, built from the Go module proxy in one wrapper
# module: `go install` of either is refused (their go.mod files carry replace directives), so the
# wrapper requires k8s.io/kubernetes and replaces every staging module with its published copy.
# The first build takes about 10 minutes on two quiet cores (57 on two busy ones) and 0.6 GB
# of module cache, removed afterwards: only the two binaries stay in $C/bin.
# Sourced by scripts/peers.sh.
KUBE_VER=v1.34.4
KUBE_STAGING_VER=v0.34.4
KUBE_ETCD_VER=v3.6.4
KUBE_STAGING=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
  cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client
  csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
  kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils
  pod-security-admission sample-apiserver sample-cli-plugin sample-controller)
# The static admin token the tests use to create ServiceAccounts, bindings and TokenRequests
# (a test-only credential: the peer listens on 127.0.0.1 only).
KUBE_ADMIN_TOKEN=bootseal-test-kube-admin
kube_version() { echo "k8s.io/kubernetes $KUBE_VER (kube-apiserver), go.etcd.io/etcd/server/v3 $KUBE_ETCD_VER (etcd)"; }
# A binary built from a module's main package names that module as its `mod` (go_has), even
# when a wrapper module drove the build.
kube_installed() {
  go_has kube-apiserver k8s.io/kubernetes "$KUBE_VER" && go_has etcd go.etcd.io/etcd/server/v3 "$KUBE_ETCD_VER"
}
# Like go_install: a private GOPATH/module/build cache, removed afterwards; only the binaries stay.
kube_install() {
  mkdir -p "$C/go" "$C/bin"
  local tmp rc=0 m
  tmp="$(mktemp -d "$C/go/build.XXXXXX")"
  (
    set -e
    export GOPATH="$tmp" GOMODCACHE="$tmp/pkg/mod" GOCACHE="$tmp/cache" GOFLAGS="-modcacherw -buildvcs=false"
    mkdir -p "$tmp/wrap"
    cd "$tmp/wrap"
    {
      printf 'module bootseal.test/kube-peer\n\ngo 1.24.0\n\n'
      printf 'require (\n\tk8s.io/kubernetes %s\n\tgo.etcd.io/etcd/server/v3 %s\n)\n\n' "$KUBE_VER" "$KUBE_ETCD_VER"
      printf 'replace (\n'
      for m in "${KUBE_STAGING[@]}"; do printf '\tk8s.io/%s => k8s.io/%s %s\n' "$m" "$m" "$KUBE_STAGING_VER"; done
      printf ')\n'
    } >go.mod
    printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "go.etcd.io/etcd/server/v3"\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n)\n' >tools.go
    go mod tidy
    # The version the binary reports (`kube-apiserver --version`, /version) is set by the
    # Kubernetes release scripts through ldflags; a module build gets it the same way.
    go build -ldflags "-X k8s.io/component-base/version.gitVersion=$KUBE_VER -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34" \
      -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
    go build -o "$tmp/etcd" go.etcd.io/etcd/server/v3
    mv "$tmp/kube-apiserver" "$tmp/etcd" "$C/bin/"
  ) || rc=$?
  rm -rf "$tmp"
  return "$rc"
}
# $KUBE_ETCD_PORT (etcd clients), $KUBE_ETCD_PEER_PORT (etcd peers), $KUBE_API_PORT (the API server).
kube_port_keys() { echo KUBE_ETCD KUBE_ETCD_PEER KUBE_API; }
# A self-signed serving certificate for 127.0.0.1, the ServiceAccount signing key pair, and the
# static admin token (tokens.csv) the tests use; RBAC on, so the reviewer needs its binding.
kube_start() {
  local d="$DATA/kube"
  mkdir -p "$d/etcd" "$d/certs"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$d/serving.key" -out "$d/serving.crt" \
    >/dev/null 2>&1 || return 1
  openssl genrsa -out "$d/sa.key" 2048 >/dev/null 2>&1 || return 1
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" >/dev/null 2>&1 || return 1
  printf '%s,admin,admin,system:masters\n' "$KUBE_ADMIN_TOKEN" >"$d/tokens.csv"
  chmod 600 "$d/tokens.csv" "$d/sa.key" "$d/serving.key"
  start_daemon kube-etcd "$C/bin/etcd" --name kube-peer --data-dir "$d/etcd" \
    --listen-client-urls "http://127.0.0.1:$KUBE_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$KUBE_ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$KUBE_ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$KUBE_ETCD_PEER_PORT" \
    --initial-cluster "kube-peer=http://127.0.0.1:$KUBE_ETCD_PEER_PORT" --log-level warn
  # The API server retries etcd until it answers, so both start at once.
  start_daemon kube "$C/bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$KUBE_ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$KUBE_API_PORT" \
    --tls-cert-file "$d/serving.crt" --tls-private-key-file "$d/serving.key" --cert-dir "$d/certs" \
    --token-auth-file "$d/tokens.csv" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$d/sa.pub" \
    --service-account-signing-key-file "$d/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
    --profiling=false --v=0
}
kube_ready() {
  [[ "$(http_code "https://127.0.0.1:$KUBE_API_PORT/readyz" --cacert "$DATA/kube/serving.crt" \
    -H "Authorization: Bearer $KUBE_ADMIN_TOKEN")" == 200 ]]
}
kube_env() {
  printf 'export BOOTSEAL_TEST_KUBE_SERVER=%q\n' "https://127.0.0.1:$KUBE_API_PORT"
  printf 'export BOOTSEAL_TEST_KUBE_CA_FILE=%q\n' "$DATA/kube/serving.crt"
  printf 'export BOOTSEAL_TEST_KUBE_ADMIN_TOKEN=%q\n' "$KUBE_ADMIN_TOKEN"
  # The ServiceAccount signing key: a test signs an expired token with it, to see it refused.
  printf 'export BOOTSEAL_TEST_KUBE_SA_KEY_FILE=%q\n' "$DATA/kube/sa.key"
  printf 'export BOOTSEAL_TEST_KUBE_ISSUER=%q\n' "https://kubernetes.default.svc"
}
