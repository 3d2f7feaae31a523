# qemu-user-static (Debian package): qemu-aarch64-static runs the linux-arm64 single
# executable on an x64 host, with the arm64 C and C++ runtimes of the Debian cross packages
# as its sysroot (`qemu-aarch64-static -L "$BOOTSEAL_TEST_QEMU_AARCH64_SYSROOT" EXE`): no
# multiarch, no binfmt registration. CLI only. Sourced by scripts/peers.sh.
qemu_version() { echo "qemu-user-static 7.2 (Debian 12 package qemu-user-static; libc6-arm64-cross 2.36, libstdc++6-arm64-cross 12.2)"; }
qemu_installed() {
  [[ "$(deb_version qemu-user-static)" == 1:7.2+* ]] && command -v qemu-aarch64-static >/dev/null &&
    [[ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 && -e /usr/aarch64-linux-gnu/lib/libstdc++.so.6 ]]
}
qemu_install() { apt_install qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross; }
qemu_env() {
  printf 'export BOOTSEAL_TEST_QEMU_AARCH64_BIN=%q\n' "$(command -v qemu-aarch64-static)"
  printf 'export BOOTSEAL_TEST_QEMU_AARCH64_SYSROOT=%q\n' /usr/aarch64-linux-gnu
}
