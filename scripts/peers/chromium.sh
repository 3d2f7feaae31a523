# chromium (Debian package; headless browser only, no daemon): the fleet page's tests drive it
# with puppeteer-core (--headless=new --no-sandbox). Sourced by scripts/peers.sh.
chromium_version() { echo "chromium 156 (Debian 12 package chromium)"; }
chromium_installed() { [[ "$(deb_version chromium)" == 156.* ]] && command -v chromium >/dev/null; }
chromium_install() { apt_install chromium; }
chromium_env() { printf 'export BOOTSEAL_TEST_CHROMIUM=%q\n' "$(command -v chromium)"; }
