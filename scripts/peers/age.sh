# age (Debian package; CLI only). Sourced by scripts/peers.sh.
age_version() { echo "age 1.1.1 (Debian 12 package age)"; }
age_installed() { [[ "$(deb_version age)" == 1.1.1-* ]] && command -v age >/dev/null && command -v age-keygen >/dev/null; }
age_install() { apt_install age; }
age_env() {
  printf 'export BOOTSEAL_TEST_AGE_BIN=%q\n' "$(command -v age)"
  printf 'export BOOTSEAL_TEST_AGE_KEYGEN_BIN=%q\n' "$(command -v age-keygen)"
}
