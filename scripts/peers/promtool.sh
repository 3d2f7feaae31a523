# promtool (Prometheus 2.42, from Debian 12's `prometheus` package; CLI only): checks the
# service's /metrics text (`promtool check metrics`) and the alert rules in deploy/prometheus
# (`check rules`, `test rules`). The package is downloaded, not installed (it would bring a
# Prometheus server and its systemd unit): only the promtool binary is kept in the cache.
# Sourced by scripts/peers.sh.
PROMTOOL_DEB_VER=2.42.0+ds-5+deb12u1
promtool_version() { echo "promtool 2.42.0 (Debian 12 package prometheus $PROMTOOL_DEB_VER)"; }
promtool_installed() {
  [[ -x "$C/bin/promtool" && "$(cat "$C/bin/promtool.deb-version" 2>/dev/null)" == "$PROMTOOL_DEB_VER" ]] &&
    "$C/bin/promtool" --version 2>&1 | grep -q 'version 2\.42\.0'
}
promtool_install() {
  local tmp deb rc=0
  mkdir -p "$C/bin"
  tmp="$(mktemp -d "$C/promtool.XXXXXX")"
  if deb="$(apt_download prometheus "$tmp")" && [[ -n "$deb" ]]; then
    local got
    got="$(dpkg-deb -f "$deb" Version)"
    if [[ "$got" != "$PROMTOOL_DEB_VER" ]]; then
      printf 'prometheus candidate is %s, pinned %s\n' "$got" "$PROMTOOL_DEB_VER" >&2
      rc=1
    else
      dpkg-deb -x "$deb" "$tmp/root" && install -m 0755 "$tmp/root/usr/bin/promtool" "$C/bin/promtool" &&
        printf '%s\n' "$got" >"$C/bin/promtool.deb-version" || rc=$?
    fi
  else
    rc=1
  fi
  rm -rf "$tmp"
  return "$rc"
}
promtool_env() { printf 'export BOOTSEAL_TEST_PROMTOOL=%q\n' "$C/bin/promtool"; }
