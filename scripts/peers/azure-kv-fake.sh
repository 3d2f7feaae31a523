# FAKE Azure Key Vault (keys REST API over HTTPS), hand-written in test/fakes/azure-kv-fake.ts:
# no real emulator installs here (lowkey-vault's app is not on Maven Central; docs/development.md,
# "Fakes"). Runs on the repo's pinned Node 24. TLS with a private CA made by openssl once per run
# directory ($RUN/tls/azure-kv-fake); clients verify it through NODE_EXTRA_CA_CERTS.
# Sourced by scripts/peers.sh.
AZURE_KV_FAKE_NODE="$REPO/node_modules/.bin/node"
AZURE_KV_FAKE_TLS="$RUN/tls/azure-kv-fake"
AZURE_KV_FAKE_BUNDLE="$RUN/tls/ca-bundle.pem"
azure_kv_fake_version() {
  local v
  v="$(sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$REPO/node_modules/@azure/keyvault-keys/package.json" 2>/dev/null | head -n 1)"
  echo "fake test/fakes/azure-kv-fake.ts (speaks the API of @azure/keyvault-keys ${v:-missing}); $(openssl version 2>/dev/null || echo 'openssl missing')"
}
azure_kv_fake_installed() {
  [[ -x "$AZURE_KV_FAKE_NODE" && -f "$REPO/test/fakes/azure-kv-fake.ts" ]] && command -v openssl >/dev/null
}
azure_kv_fake_install() {
  echo "azure-kv-fake needs the repo's node_modules ('npm ci' in $REPO) and openssl (apt-get install openssl)" >&2
  return 1
}
azure_kv_fake_port_keys() { echo AZURE_KV_FAKE; } # $AZURE_KV_FAKE_PORT (scripts/peers.sh, "ports")

# azure_kv_fake_certs : a CA and a server certificate for localhost and 127.0.0.1 signed by it,
# made once per run directory (kept while the server certificate is valid for another day).
azure_kv_fake_certs() {
  local d="$AZURE_KV_FAKE_TLS"
  if [[ -f "$d/ca.pem" && -f "$d/server-key.pem" && -f "$d/server.pem" ]] &&
    openssl x509 -checkend 86400 -noout -in "$d/server.pem" >/dev/null 2>&1; then
    return 0
  fi
  mkdir -p "$RUN/tls"
  local tmp
  tmp="$(mktemp -d "$RUN/tls/azure-kv-fake.XXXXXX")"
  # One && chain: `set -e` would be ignored inside a subshell that is followed by ||.
  (
    umask 077 && cd "$tmp" &&
      openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout ca-key.pem -out ca.pem \
        -subj "/CN=bootseal test CA (azure-kv-fake)" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" &&
      openssl req -newkey rsa:2048 -nodes -sha256 -keyout server-key.pem -out server.csr -subj "/CN=localhost" &&
      printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
        "extendedKeyUsage=serverAuth" "subjectAltName=DNS:localhost,IP:127.0.0.1" >server.ext &&
      openssl x509 -req -sha256 -days 825 -in server.csr -CA ca.pem -CAkey ca-key.pem \
        -set_serial "0x$(openssl rand -hex 8)" -extfile server.ext -out server.pem &&
      chmod 644 ca.pem server.pem && rm -f server.csr server.ext
  ) || {
    rm -rf "$tmp"
    return 1
  }
  rm -rf "$d"
  mv "$tmp" "$d"
}

azure_kv_fake_start() {
  mkdir -p "$RUN/tls"
  if ! azure_kv_fake_certs >"$RUN/tls/azure-kv-fake-openssl.log" 2>&1; then
    # Reported by wait_ready: the "peer" exits at once and its log says why.
    start_daemon azure-kv-fake sh -c 'echo "openssl could not make the TLS certificates: see $1"; exit 1' \
      sh "$RUN/tls/azure-kv-fake-openssl.log"
    return 0
  fi
  start_daemon azure-kv-fake "$AZURE_KV_FAKE_NODE" "$REPO/test/fakes/azure-kv-fake.ts" \
    --listen "127.0.0.1:$AZURE_KV_FAKE_PORT" --cert "$AZURE_KV_FAKE_TLS/server.pem" \
    --key "$AZURE_KV_FAKE_TLS/server-key.pem"
}
# Ready when it answers an unauthenticated request with the 401 challenge, over verified TLS.
azure_kv_fake_ready() {
  [[ "$(http_code "https://localhost:$AZURE_KV_FAKE_PORT/keys/ready?api-version=7.4" \
    --cacert "$AZURE_KV_FAKE_TLS/ca.pem")" == 401 ]]
}
azure_kv_fake_env() {
  printf 'export BOOTSEAL_TEST_AZURE_KV_URL=%q\n' "https://localhost:$AZURE_KV_FAKE_PORT"
  # NODE_EXTRA_CA_CERTS is one file: the fake's CA, plus any bundle an earlier peer wrote into
  # this env file (write_env is filling $RUN/env.tmp) and any the caller already had, deduplicated.
  local earlier f
  earlier="$(
    unset NODE_EXTRA_CA_CERTS
    # shellcheck source=/dev/null
    . "$RUN/env.tmp" >/dev/null 2>&1 || true
    printf '%s' "${NODE_EXTRA_CA_CERTS:-}"
  )"
  {
    cat "$AZURE_KV_FAKE_TLS/ca.pem"
    for f in "$earlier" "${NODE_EXTRA_CA_CERTS:-}"; do
      if [[ -n "$f" && "$f" != "$AZURE_KV_FAKE_BUNDLE" && -r "$f" ]]; then cat "$f"; fi
    done
  } | awk '/-----BEGIN /{b=""} {b=b $0 "\n"} /-----END /{if (!(b in seen)) {seen[b]=1; printf "%s", b}}' \
    >"$AZURE_KV_FAKE_BUNDLE.tmp" && mv "$AZURE_KV_FAKE_BUNDLE.tmp" "$AZURE_KV_FAKE_BUNDLE"
  printf 'export NODE_EXTRA_CA_CERTS=%q\n' "$AZURE_KV_FAKE_BUNDLE"
}
