# lib.sh: helpers for the shell tests (sourced). Each check counts; `finish`
# prints "N passed, M failed" and exits non-zero on any failure.
set -u
MT="${MT_BIN:-build/bin}/megatrain"
FIX=megatrain/tests/fixtures
DATA=megatrain/tests/data
passed=0
failed=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [ ! -x "$MT" ]; then
  echo "missing $MT (build first: make)" >&2
  exit 1
fi

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
check() { # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then ok; else bad "$what"; fi
}
finish() {
  echo "$(basename "$0" .sh): $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}
