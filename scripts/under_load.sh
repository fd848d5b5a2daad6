#!/usr/bin/env bash
# Run part of the suite N times while busy-loop processes (more than the cores) saturate the CPUs,
# and report how many runs passed. Usage: scripts/under_load.sh [RUNS] [pytest args...]
#   scripts/under_load.sh 20 tests/tui          # the TUI tests, 20 times
#   scripts/under_load.sh 5                     # the whole suite, 5 times
# LOAD=<n> sets the number of busy loops (default: cores + 2).
set -uo pipefail
cd "$(dirname "$0")/.."

runs="${1:-20}"
shift || true
[ "$#" -gt 0 ] || set -- tests
load="${LOAD:-$(( $(nproc) + 2 ))}"

busy=()
for _ in $(seq "$load"); do
  ( while :; do :; done ) &
  busy+=("$!")
done
suite=""
stop_all() {
  [ -n "$suite" ] && kill "$suite" 2>/dev/null
  for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null; done
}
trap stop_all EXIT
trap 'exit 130' INT TERM

passed=0
for run in $(seq "$runs"); do
  started=$(date +%s)
  log="${TMPDIR:-/tmp}/under_load.$$.$run.log"
  uv run pytest -q -p no:cacheprovider "$@" >"$log" 2>&1 &
  suite=$!
  if wait "$suite"; then
    passed=$((passed + 1)); result=pass
  else
    result=FAIL
  fi
  suite=""
  echo "run $run/$runs: $result in $(( $(date +%s) - started )) s ($(tail -n 1 "$log"))"
done
echo "under load ($load busy loops on $(nproc) cores): $passed/$runs runs passed"
[ "$passed" -eq "$runs" ]
