# zsh and fish (Debian packages), for the completion scripts (`bootseal completion zsh|fish`).
# Sourced by scripts/peers.sh.
shells_version() { echo "zsh 5.9, fish 3.6.0 (Debian 12 packages zsh, fish)"; }
shells_installed() {
  [[ "$(deb_version zsh)" == 5.9-* && "$(deb_version fish)" == 3.6.0-* ]] &&
    command -v zsh >/dev/null && command -v fish >/dev/null
}
shells_install() { apt_install zsh fish; }
shells_env() {
  printf 'export BOOTSEAL_TEST_ZSH_BIN=%q\n' "$(command -v zsh)"
  printf 'export BOOTSEAL_TEST_FISH_BIN=%q\n' "$(command -v fish)"
}
