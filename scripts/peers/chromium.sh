# Chromium (Debian package), headless, driven by puppeteer-core: renders the service's own
# pages (the fleet page at /, Swagger UI at /docs) and reports their CSP violations. Sourced by scripts/peers.sh.
chromium_version() { echo "chromium $(deb_version chromium) (Debian 12 package chromium)"; }
chromium_installed() { [[ -n "$(deb_version chromium)" ]] && command -v chromium >/dev/null; }
chromium_install() { apt_install chromium; }
chromium_env() { printf 'export BOOTSEAL_TEST_CHROMIUM_BIN=%q\n' "$(command -v chromium)"; }
