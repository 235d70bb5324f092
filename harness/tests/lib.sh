# lib.sh: the preamble of harness/tests/test_*.sh, sourced first:
#   . "$(dirname "$0")/lib.sh" [jq] [python3] [bins]
# The repo root becomes the working directory and MT_BIN is exported (default build/bin).
# Each word names what the test needs, checked in that order; without it the test is
# skipped (exit 77, CTest's skip): jq or python3, a command on PATH; bins, $MT_BIN's
# megatrain and mt-env. Then: $tmp, a temp dir removed on exit; `fails`, counted by
# `fail WHAT` ("FAIL WHAT"); `pass WHAT` says "ok   WHAT"; `exits RC WHAT CMD...` passes
# when CMD (its output dropped) exits RC; `finish` ends the test: exit 1 after any failure.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export MT_BIN=${MT_BIN:-$(pwd)/build/bin}
for need in "$@"; do
  case $need in
    bins) [ -x "$MT_BIN/megatrain" ] && [ -x "$MT_BIN/mt-env" ] ||
            { echo "skipped: no $MT_BIN/megatrain or mt-env"; exit 77; } ;;
    *) command -v "$need" > /dev/null || { echo "skipped: $need not installed"; exit 77; } ;;
  esac
done
unset need
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
pass() { echo "ok   $*"; }
exits() {
  local want=$1 what=$2 rc
  shift 2
  "$@" > /dev/null 2>&1; rc=$?
  if [ "$rc" = "$want" ]; then pass "$what (exit $want)"; else fail "$what: exit $rc, want $want"; fi
}
finish() {
  [ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
  echo "all checks passed"
}
