# cloud-init (Debian package; CLI only: `cloud-init schema -c FILE` validates the cloud-init
# user-data stub). Also makes sure systemd-analyze is there (`systemd-analyze verify` checks
# the unit). Sourced by scripts/peers.sh.
#
# Installing the package enables cloud-init at the next boot; on a machine that did not have
# it before, /etc/cloud/cloud-init.disabled keeps it from running there.
cloud_init_version() { echo "cloud-init 22.4.2 (Debian 12 package cloud-init)"; }
cloud_init_installed() {
  [[ "$(deb_version cloud-init)" == 22.4.2-* ]] && command -v cloud-init >/dev/null &&
    command -v systemd-analyze >/dev/null
}
cloud_init_install() {
  local had
  had="$(deb_version cloud-init)"
  apt_install cloud-init systemd
  if [[ -z "$had" ]]; then as_root touch /etc/cloud/cloud-init.disabled; fi
}
cloud_init_env() { printf 'export BOOTSEAL_TEST_CLOUD_INIT_BIN=%q\n' "$(command -v cloud-init)"; }
