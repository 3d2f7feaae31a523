# Wine (Debian package wine64, 64-bit only, no recommends): runs the windows-x64 single
# executable on Linux. No display: WINEDEBUG=-all and no DISPLAY; the tests give it a
# WINEPREFIX of their own under a temporary directory (the first start creates it). CLI only.
# Sourced by scripts/peers.sh.
wine_version() { echo "wine 8.0 (Debian 12 package wine64)"; }
wine_bin() {
  local b
  for b in /usr/lib/wine/wine64 "$(command -v wine64 2>/dev/null)"; do
    [[ -n "$b" && -x "$b" ]] && { printf '%s\n' "$b"; return 0; }
  done
  return 1
}
wine_installed() { [[ "$(deb_version wine64)" == 8.0~* ]] && wine_bin >/dev/null; }
wine_install() { apt_install wine64; }
wine_env() { printf 'export BOOTSEAL_TEST_WINE_BIN=%q\n' "$(wine_bin)"; }
