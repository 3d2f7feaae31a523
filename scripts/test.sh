#!/usr/bin/env bash
# `npm test`: lint, type-check, start the real peers, run every test, stop the peers.
# The peers are stopped on every exit (success, failure, Ctrl-C, SIGTERM). Exit status is
# non-zero when any stage fails. See docs/development.md, "Test lanes".
#
#   scripts/test.sh        everything (npm test)
#   scripts/test.sh unit   the unit lane (npm run test:unit): every test file not listed in
#                          test/helpers/peer-tests.txt, no peer started, no peer variable set
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
RUN="${BOOTSEAL_PEERS_RUN:-$REPO/.peers}"
NODE="$REPO/node_modules/.bin/node" # Node 24 from the `node` devDependency, not the system one
BIN="$REPO/node_modules/.bin"
# One test that hangs fails after 10 minutes with its name, instead of holding the run to CI's
# limit (the longest test takes about a minute). Child processes are stopped with a bound too
# (test/helpers/child.ts, stopChild).
TEST_TIMEOUT_MS=600000

if [[ "${1:-}" == "unit" ]]; then
  [[ -x "$NODE" ]] || {
    echo "[test] $NODE is missing: run 'npm ci' first" >&2
    exit 1
  }
  shopt -s globstar nullglob
  # The peer-test list, without comments and blank lines, as " a b c " for a word match.
  peer_files=" $(sed -e 's/#.*//' -e 's/[[:space:]]*$//' test/helpers/peer-tests.txt | grep . | tr '\n' ' ') "
  files=()
  for f in test/**/*.test.ts; do
    [[ "$peer_files" == *" $f "* ]] || files+=("$f")
  done
  printf '[test] unit lane: %s test files (peer tests: test/helpers/peer-tests.txt)\n' "${#files[@]}" >&2
  # No peer variable leaks in from a sourced .peers/env: a peer test in this lane must fail
  # (test/helpers/peers.ts refuses when BOOTSEAL_LANE=unit), not pass against a running peer.
  reporter="${BOOTSEAL_TEST_REPORTER:-dot}"
  while IFS= read -r var; do unset "$var"; done < <(compgen -e | grep '^BOOTSEAL_TEST_' || true)
  start=$(date +%s)
  rc=0
  BOOTSEAL_LANE=unit "$NODE" --test --test-reporter="$reporter" --test-concurrency=2 --test-timeout="$TEST_TIMEOUT_MS" \
    "${files[@]}" || rc=$?
  printf '[test] unit lane: %ss, exit %s\n' "$(($(date +%s) - start))" "$rc" >&2
  exit "$rc"
fi

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
unset BOOTSEAL_LANE # every lane: peer() answers from .peers/env
run "$NODE" --test --test-reporter=spec --test-concurrency=2 --test-timeout="$TEST_TIMEOUT_MS" "test/**/*.test.ts" || status=$?
exit "$status"
