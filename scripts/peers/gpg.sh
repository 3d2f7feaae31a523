# GnuPG (Debian package gnupg; CLI only). Sourced by scripts/peers.sh.
gpg_version() { echo "gnupg 2.2.40 (Debian 12 package gnupg)"; }
gpg_installed() {
  [[ "$(deb_version gpg)" == 2.2.40-* ]] && [[ -n "$(deb_version gpg-agent)" ]] && command -v gpg >/dev/null && command -v gpgconf >/dev/null
}
gpg_install() { apt_install gnupg; }
gpg_env() {
  printf 'export BOOTSEAL_TEST_GPG_BIN=%q\n' "$(command -v gpg)"
  printf 'export BOOTSEAL_TEST_GPGCONF_BIN=%q\n' "$(command -v gpgconf)"
}
