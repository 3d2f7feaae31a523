#!/usr/bin/env bash
# Real peers for the test suite: install (pinned, cached outside the checkout), start on
# 127.0.0.1 on free ports (see "ports" below), wait until each answers, write .peers/env
# (or $BOOTSEAL_PEERS_RUN/env), stop by PID.
#
#   scripts/peers.sh install   install every missing peer into the cache (idempotent)
#   scripts/peers.sh up        install if missing, stop a previous run, pick the ports,
#                              start every peer, wait for it, set it up, write .peers/env
#   scripts/peers.sh down      stop every peer started by `up` (by PID and process group)
#   scripts/peers.sh status    installed versions, running peers, env file
#
# Each peer lives in scripts/peers/<name>.sh (see docs/development.md, "Adding a peer").
# With CI=true any install or start failure is fatal; otherwise the other peers still come
# up, the failure is reported, and the command exits non-zero at the end.
set -euo pipefail

# The peers, in start order. Adding a peer = one file in scripts/peers/ + one name here.
# gcp-kms-fake and azure-kv-fake are hand-written fakes (test/fakes/): no real peer installs here.
# azure-kv-fake's NODE_EXTRA_CA_CERTS bundle takes in one exported by a peer listed before it
# (no other peer exports one now): list a peer that would, before azure-kv-fake.
PEERS=(age age-plugin-batchpass gpg shells sops sops-3-13-3 seaweedfs moto moto-sts local-kms fake-gcs openbao spiffe gcp-kms-fake azure-kv-fake cloud-init ignition-validate ignition qemu wine kube capi promtool helm chromium openapi-spec-validator swtpm)
# BOOTSEAL_PEERS_ONLY="name ...": only these peers (in PEERS order), e.g. to start some peers in
# a second run directory (BOOTSEAL_PEERS_RUN) beside a full set in another one.
if [[ -n "${BOOTSEAL_PEERS_ONLY:-}" ]]; then
  only=()
  for p in "${PEERS[@]}"; do
    [[ " $BOOTSEAL_PEERS_ONLY " == *" $p "* ]] && only+=("$p")
  done
  for p in $BOOTSEAL_PEERS_ONLY; do
    [[ " ${PEERS[*]} " == *" $p "* ]] || {
      printf '[peers] ERROR: BOOTSEAL_PEERS_ONLY: unknown peer %s (peers: %s)\n' "$p" "${PEERS[*]}" >&2
      exit 2
    }
  done
  PEERS=("${only[@]}")
  unset only
fi

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
C="${BOOTSEAL_PEERS_CACHE:-$HOME/.cache/bootseal-peers}"
RUN="${BOOTSEAL_PEERS_RUN:-$REPO/.peers}"
LOGS="$RUN/logs"
PIDS="$RUN/pids"
DATA="$RUN/data"
WAIT_SECONDS="${BOOTSEAL_PEERS_WAIT:-90}"
CI="${CI:-}"
is_ci() { [[ "$CI" == "true" || "$CI" == "1" ]]; }

# Go builds download into the cache dir (see go_install), never into ~/go: a fresh cache is a
# fresh install, and deleting the cache removes every trace.
export GOBIN="$C/bin"
export GOFLAGS="-modcacherw"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_CACHE_DIR="$C/pip-cache"
export PIP_NO_INPUT=1

say() { printf '[peers] %s\n' "$*" >&2; }
warn() { printf '[peers] WARNING: %s\n' "$*" >&2; }
die() {
  printf '[peers] ERROR: %s\n' "$*" >&2
  exit 1
}
# ci_fail MESSAGE : in CI, stops what this run started and fails; elsewhere does nothing.
ci_fail() {
  is_ci || return 0
  cmd_down
  die "CI: $*"
}
now() { date +%s; }
fn() { printf '%s' "${1//-/_}"; } # peer name -> function prefix
has_fn() { declare -F "$1" >/dev/null; }

for p in "${PEERS[@]}"; do
  # shellcheck source=/dev/null
  source "$REPO/scripts/peers/$p.sh"
done

# ---------------------------------------------------------------- ports
# No peer has a fixed port: two checkouts (or two run directories) run side by side. Each
# server peer names its ports with `<n>_port_keys` (e.g. MOTO; SEAWEEDFS SEAWEEDFS_MASTER …)
# and reads them as $<KEY>_PORT. `up` gives each key BOOTSEAL_PEER_PORT_<KEY> when set, else a
# port the kernel reports free on 127.0.0.1 (and on every interface: local-kms binds them
# all) whose next port is free too (OpenBao's dev server takes port+1 for its cluster
# listener), and records them in $RUN/ports; the other commands read that file. Tests learn
# the ports from $RUN/env only.
PORTS_FILE="$RUN/ports"

port_keys_of() {
  local f
  f="$(fn "$1")"
  if has_fn "${f}_port_keys"; then "${f}_port_keys"; fi
}

# ports_of PEER : the peer's port numbers (checked before its start, shown by status).
ports_of() {
  local k v
  for k in $(port_keys_of "$1"); do
    v="${k}_PORT"
    printf '%s\n' "${!v:-}"
  done
}

# free_ports COUNT : COUNT distinct free TCP port numbers, each with its next port free too.
# The probe sockets stay open until all are chosen, so no two answers overlap. The ports lie
# below the kernel's ephemeral range: the peers started before a peer's turn make outgoing
# connections from that range, and one of them took a chosen port (swtpm, started last, found
# its port in use).
free_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
want, held, out, taken = int(sys.argv[1]), [], [], set()
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except OSError:
    low = 32768
while len(out) < want:
    a = socket.socket()
    try:
        a.bind(("0.0.0.0", random.randrange(10000, low - 1) if low > 12000 else 0))
    except OSError:
        a.close()
        continue
    held.append(a)
    port = a.getsockname()[1]
    if port + 1 > 65535 or port in taken or port + 1 in taken:
        continue
    b = socket.socket()
    try:
        b.bind(("0.0.0.0", port + 1))
    except OSError:
        b.close()
        continue
    held.append(b)
    taken.update((port, port + 1))
    out.append(port)
print(" ".join(map(str, out)))
PY
}

# assign_ports : every key of every peer in PEERS gets its port ($<KEY>_PORT), written to
# $RUN/ports. Ports given by BOOTSEAL_PEER_PORT_<KEY> are taken as they are.
assign_ports() {
  local p k keys=() need=() free=() i=0 override
  for p in "${PEERS[@]}"; do
    for k in $(port_keys_of "$p"); do keys+=("$k"); done
  done
  for k in "${keys[@]}"; do
    override="BOOTSEAL_PEER_PORT_$k"
    if [[ -n "${!override:-}" ]]; then
      [[ "${!override}" =~ ^[0-9]+$ ]] || die "$override=${!override} is not a port number"
      printf -v "${k}_PORT" '%s' "${!override}"
    else
      need+=("$k")
    fi
  done
  if ((${#need[@]})); then
    read -r -a free <<<"$(free_ports "${#need[@]}")" || true
    ((${#free[@]} == ${#need[@]})) || die "could not find ${#need[@]} free ports on 127.0.0.1"
    for k in "${need[@]}"; do
      printf -v "${k}_PORT" '%s' "${free[$i]}"
      i=$((i + 1))
    done
  fi
  mkdir -p "$RUN"
  {
    printf '# written by scripts/peers.sh up: KEY=PORT (override one with BOOTSEAL_PEER_PORT_KEY)\n'
    for k in "${keys[@]}"; do
      local v="${k}_PORT"
      printf '%s=%s\n' "$k" "${!v}"
    done
  } >"$PORTS_FILE.tmp"
  mv "$PORTS_FILE.tmp" "$PORTS_FILE"
}

# load_ports : the ports the last `up` recorded in this run directory (for status).
load_ports() {
  [[ -f "$PORTS_FILE" ]] || return 0
  local k v
  while IFS='=' read -r k v; do
    [[ "$k" =~ ^[A-Z0-9_]+$ && "$v" =~ ^[0-9]+$ ]] && printf -v "${k}_PORT" '%s' "$v"
  done <"$PORTS_FILE"
}

# ---------------------------------------------------------------- helpers for peer files

# Runs a command with root rights (directly as root, else through sudo).
as_root() {
  if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo "$@"; fi
}

# apt_install PKG... : installs Debian packages; `apt-get update` only runs when a package is
# missing, at most once per `install`, under a lock (peers install in parallel).
apt_install() {
  mkdir -p "$C"
  (
    flock 9
    if [[ ! -f "$RUN/tmp/apt-updated" ]]; then
      as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
      mkdir -p "$RUN/tmp" && touch "$RUN/tmp/apt-updated"
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
  ) 9>"$C/.apt.lock"
}

# apt_download PKG DIR : downloads PKG's .deb (the candidate version) into DIR, without
# installing it (no root needed unless `apt-get update` has to run first); prints its path.
apt_download() {
  mkdir -p "$C" "$2"
  if ! apt-cache show "$1" >/dev/null 2>&1; then
    (
      flock 9
      if [[ ! -f "$RUN/tmp/apt-updated" ]]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
        mkdir -p "$RUN/tmp" && touch "$RUN/tmp/apt-updated"
      fi
    ) 9>"$C/.apt.lock"
  fi
  (cd "$2" && apt-get download -q "$1" >&2) && compgen -G "$2/${1}_*.deb" | head -n 1
}

# deb_version PKG : the installed Debian version of PKG, or nothing.
deb_version() { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null | awk '/install ok installed/ {print $4}'; }

VENV="$C/venv"
# pip_install SPEC... : installs into the shared virtual environment $VENV (created on demand).
pip_install() {
  mkdir -p "$C"
  (
    flock 9
    if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
      rm -rf "$VENV"
      python3 -m venv "$VENV"
    fi
    "$VENV/bin/pip" install -q "$@"
  ) 9>"$C/.venv.lock"
}

# pip_has DIST VERSION : true when the venv holds exactly that distribution version.
pip_has() {
  local dist="${1//-/_}" v="$2"
  compgen -G "$VENV/lib/python3*/site-packages/${dist}-${v}.dist-info" >/dev/null &&
    "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1
}

# go_install MODULE/PATH VERSION : `go install` into $C/bin. Module and build caches are
# private to this build and removed afterwards (over 3 GB for sops): only the binary stays.
go_install() {
  mkdir -p "$C/go"
  local tmp rc=0
  tmp="$(mktemp -d "$C/go/build.XXXXXX")"
  GOPATH="$tmp" GOMODCACHE="$tmp/pkg/mod" GOCACHE="$tmp/cache" go install "$1@$2" || rc=$?
  rm -rf "$tmp"
  return "$rc"
}

# go_has BINARY MODULE VERSION : true when $C/bin/BINARY was built from MODULE at VERSION
# (read from the binary's own build information).
go_has() {
  [[ -x "$C/bin/$1" ]] && go version -m "$C/bin/$1" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+$2[[:space:]]+$3([[:space:]]|$)"
}

# port_busy PORT : true when something accepts connections on 127.0.0.1:PORT.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# http_code URL [curl args...] : the HTTP status code, 000 when nothing answers.
http_code() {
  local url="$1"
  shift
  curl -s -o /dev/null -m 3 -w '%{http_code}' "$@" "$url" 2>/dev/null || true
}

# start_daemon NAME [env VAR=VALUE...] CMD ARGS... : starts a peer in its own session and
# process group, stdout+stderr to $LOGS/NAME.log, PID (= process group id) and start time
# to $PIDS/NAME.pid.
start_daemon() {
  local name="$1"
  shift
  mkdir -p "$LOGS" "$PIDS"
  : >"$LOGS/$name.log"
  # setsid execs in place (a background job is not a group leader), so $! is the peer itself.
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  local pid=$!
  printf '%s %s\n' "$pid" "$(proc_start "$pid")" >"$PIDS/$name.pid"
}

proc_start() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null || true; }

# alive NAME : the peer's recorded process still runs (same PID and start time).
alive() {
  local f="$PIDS/$1.pid" pid st
  [[ -f "$f" ]] || return 1
  read -r pid st <"$f" || return 1
  [[ -n "$pid" && -d "/proc/$pid" && "$(proc_start "$pid")" == "$st" ]]
}

log_tail() {
  if [[ -f "$LOGS/$1.log" ]]; then
    printf '[peers] ---- last lines of %s ----\n' "$LOGS/$1.log" >&2
    tail -n "${2:-25}" "$LOGS/$1.log" >&2
    printf '[peers] ----\n' >&2
  fi
}

# ---------------------------------------------------------------- install

install_one() {
  local p="$1" f
  f="$(fn "$p")"
  if "${f}_installed"; then
    say "$p: already installed ($("${f}_version"))"
    return 0
  fi
  local t0
  t0=$(now)
  say "$p: installing $("${f}_version") (log: $LOGS/install-$p.log)"
  if "${f}_install" >>"$LOGS/install-$p.log" 2>&1 && "${f}_installed"; then
    say "$p: installed in $(($(now) - t0))s"
  else
    printf '[peers] ERROR: %s: install failed after %ss; last lines of %s:\n' "$p" "$(($(now) - t0))" \
      "$LOGS/install-$p.log" >&2
    tail -n 30 "$LOGS/install-$p.log" >&2
    return 1
  fi
}

cmd_install() {
  local t0 p failed=() pids=() names=()
  t0=$(now)
  mkdir -p "$C/bin" "$LOGS"
  rm -f "$RUN/tmp/apt-updated"
  command -v go >/dev/null || die "go is not on PATH (needed to build the Go peers)"
  command -v python3 >/dev/null || die "python3 is not on PATH (needed for the Python peers)"
  # Installs run in parallel: downloads overlap with the Go builds.
  for p in "${PEERS[@]}"; do
    : >"$LOGS/install-$p.log"
    install_one "$p" &
    pids+=($!)
    names+=("$p")
  done
  local i
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed+=("${names[$i]}")
  done
  write_versions
  say "install finished in $(($(now) - t0))s"
  if ((${#failed[@]})); then
    printf '[peers] ERROR: could not install: %s\n' "${failed[*]}" >&2
    return 1
  fi
}

write_versions() {
  [[ -z "${BOOTSEAL_PEERS_ONLY:-}" ]] || return 0 # a subset: the cache's list stays whole
  local p f tmp="$C/versions.txt.tmp"
  {
    printf '# peers installed in %s (written by scripts/peers.sh install)\n' "$C"
    for p in "${PEERS[@]}"; do
      f="$(fn "$p")"
      if "${f}_installed"; then
        printf '%-10s %s\n' "$p" "$("${f}_version")"
      else
        printf '%-10s MISSING (wanted %s)\n' "$p" "$("${f}_version")"
      fi
    done
  } >"$tmp"
  mv "$tmp" "$C/versions.txt"
}

# ---------------------------------------------------------------- up / down

stop_one() {
  local name="$1" f="$PIDS/$1.pid" pid st i
  [[ -f "$f" ]] || return 0
  read -r pid st <"$f" || true
  if [[ -n "${pid:-}" ]] && alive "$name"; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      kill -0 -- "-$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 -- "-$pid" 2>/dev/null; then
      warn "$name (pid $pid) ignored SIGTERM for 10s: SIGKILL"
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    say "$name: stopped (pid $pid)"
  fi
  rm -f "$f"
}

cmd_down() {
  [[ -d "$PIDS" ]] || return 0
  local f name
  for f in "$PIDS"/*.pid; do
    [[ -e "$f" ]] || continue
    name="$(basename "$f" .pid)"
    stop_one "$name" &
  done
  wait
  rm -f "$RUN/env" "$PORTS_FILE"
}

# wait_ready NAME : polls NAME_ready until it succeeds, the process dies, or time runs out.
wait_ready() {
  local p="$1" f t0
  f="$(fn "$p")"
  t0=$(now)
  while true; do
    if "${f}_ready" >/dev/null 2>&1; then
      say "$p: answering after $(($(now) - t0))s"
      return 0
    fi
    if ! alive "$p"; then
      printf '[peers] ERROR: %s exited before it answered\n' "$p" >&2
      log_tail "$p"
      return 1
    fi
    if (($(now) - t0 >= WAIT_SECONDS)); then
      printf '[peers] ERROR: %s did not answer within %ss\n' "$p" "$WAIT_SECONDS" >&2
      log_tail "$p"
      return 1
    fi
    sleep 0.3
  done
}

cmd_up() {
  local t0 p f port failed=() started=()
  t0=$(now)
  if ! cmd_install; then
    ci_fail "a peer could not be installed (see above)"
    warn "some peers are missing; starting the others"
  fi
  local t1
  t1=$(now)
  cmd_down
  assign_ports
  mkdir -p "$LOGS" "$PIDS" "$DATA"
  for p in "${PEERS[@]}"; do
    f="$(fn "$p")"
    has_fn "${f}_start" || continue
    if ! "${f}_installed"; then
      failed+=("$p")
      continue
    fi
    local busy=""
    for port in $(ports_of "$p"); do
      if port_busy "$port"; then busy="$port"; fi
    done
    if [[ -n "$busy" ]]; then
      printf '[peers] ERROR: %s: port %s on 127.0.0.1 is in use by another program:\n' "$p" "$busy" >&2
      (ss -ltnp "sport = :$busy" 2>/dev/null || true) >&2
      failed+=("$p")
      ci_fail "cannot start $p"
      continue
    fi
    rm -rf "${DATA:?}/$p"
    mkdir -p "$DATA/$p"
    "${f}_start"
    started+=("$p")
  done
  for p in "${started[@]}"; do
    f="$(fn "$p")"
    if wait_ready "$p" && { ! has_fn "${f}_setup" || "${f}_setup" >>"$LOGS/$p.log" 2>&1 || {
      printf '[peers] ERROR: %s: set-up failed\n' "$p" >&2
      log_tail "$p"
      false
    }; }; then
      :
    else
      failed+=("$p")
      ci_fail "peer $p did not start (see above)"
      stop_one "$p"
    fi
  done
  write_env "${failed[@]}"
  say "up: install check $((t1 - t0))s, start $(($(now) - t1))s; env: $RUN/env (source it: . $RUN/env)"
  if ((${#failed[@]})); then
    printf '[peers] ERROR: peers not available: %s\n' "${failed[*]}" >&2
    return 1
  fi
}

write_env() {
  local p f skip tmp="$RUN/env.tmp"
  {
    printf '# written by scripts/peers.sh up at %s; source it: . %s\n' "$(date -u +%FT%TZ)" "$RUN/env"
    printf 'export BOOTSEAL_TEST_PEERS_RUN=%q\n' "$RUN"
    for p in "${PEERS[@]}"; do
      skip=""
      for f in "$@"; do [[ "$f" == "$p" ]] && skip=1; done
      [[ -n "$skip" ]] && continue
      f="$(fn "$p")"
      "${f}_installed" || continue
      "${f}_env"
    done
  } >"$tmp"
  mv "$tmp" "$RUN/env"
}

cmd_status() {
  local p f
  say "cache: $C"
  if [[ -f "$C/versions.txt" ]]; then cat "$C/versions.txt"; fi
  for p in "${PEERS[@]}"; do
    f="$(fn "$p")"
    has_fn "${f}_start" || continue
    if alive "$p"; then
      printf '%-10s running (pid %s) ports %s log %s\n' "$p" "$(cut -d' ' -f1 "$PIDS/$p.pid")" \
        "$(ports_of "$p" | tr '\n' ' ')" "$LOGS/$p.log"
    else
      printf '%-10s stopped\n' "$p"
    fi
  done
  if [[ -f "$RUN/env" ]]; then say "env: $RUN/env"; else say "env: none (run: scripts/peers.sh up)"; fi
}

main() {
  case "${1:-}" in
  install) cmd_install ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status)
    load_ports
    cmd_status
    ;;
  *)
    echo "usage: scripts/peers.sh install|up|down|status" >&2
    return 2
    ;;
  esac
}

# One line, so that bash has read the whole file before anything runs (an edit of this file
# during a run cannot change what runs).
main "$@"; exit $?
