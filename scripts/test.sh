#!/usr/bin/env bash
# `npm test`: lint, type-check, start the real peers, run every test, stop the peers.
# The peers are stopped on every exit (success, failure, Ctrl-C, SIGTERM). Exit status is
# non-zero when any stage fails. See docs/development.md.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
RUN="${BOOTSEAL_PEERS_RUN:-$REPO/.peers}"
NODE="$REPO/node_modules/.bin/node" # Node 24 from the `node` devDependency, not the system one
BIN="$REPO/node_modules/.bin"

START=$(date +%s)
STAGE_START=$START
stage() {
  local t
  t=$(date +%s)
  if [[ -n "${STAGE:-}" ]]; then printf '[test] %s: %ss\n' "$STAGE" "$((t - STAGE_START))" >&2; fi
  STAGE="$1"
  STAGE_START=$t
  [[ -n "$1" ]] && printf '[test] ---- %s\n' "$1" >&2
  return 0
}

# Long stages run in the background and are waited for, so that a signal reaches the trap at
# once (bash runs traps only between foreground commands); the trap then stops that stage.
CHILD=""
run() {
  "$@" &
  CHILD=$!
  local rc=0
  wait "$CHILD" || rc=$?
  CHILD=""
  return "$rc"
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$CHILD" ]] && kill -0 "$CHILD" 2>/dev/null; then
    kill -TERM "$CHILD" 2>/dev/null || true
    wait "$CHILD" 2>/dev/null || true
  fi
  stage ""
  printf '[test] ---- stopping peers\n' >&2
  scripts/peers.sh down || true
  printf '[test] total: %ss, exit %s\n' "$(($(date +%s) - START))" "$rc" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[[ -x "$NODE" ]] || {
  echo "[test] $NODE is missing: run 'npm ci' first" >&2
  exit 1
}
printf '[test] node %s\n' "$("$NODE" --version)" >&2

stage "lint (biome check .)"
"$BIN/biome" check .

stage "type-check (tsc --noEmit)"
"$BIN/tsc" --noEmit -p tsconfig.json

stage "peers up"
if ! run scripts/peers.sh up; then
  if [[ "${CI:-}" == "true" || "${CI:-}" == "1" ]]; then
    echo "[test] CI: every peer must install and start; failing" >&2
    exit 1
  fi
  echo "[test] WARNING: some peers are missing; their tests will fail (not skip)" >&2
fi
# shellcheck source=/dev/null
. "$RUN/env"

stage "tests"
status=0
run "$NODE" --test --test-reporter=spec --test-concurrency=2 "test/**/*.test.ts" || status=$?
exit "$status"
