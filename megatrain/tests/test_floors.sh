#!/usr/bin/env bash
# The floors hold (docs/DESIGN.md#floors): each probe in tests/floors/ is compiled as a
# source of its library would be (LIBRARY__WHAT.c). An __ok probe, the includes its floor
# may make, must build; every other includes a header across a floor the wrong way and
# must fail to build, on that header not being found.
source "$(dirname "$0")/lib.sh"
B=${MT_BUILD_DIR:-build}
list="$B/floor_probes.txt"
[ -f "$list" ] || { echo "skipped: no $list (configure with CMake first)"; exit 77; }
command -v cmake > /dev/null || { echo "skipped: no cmake"; exit 77; }

n_ok=0 n_wrong=0
while read -r target; do
  [ -n "$target" ] || continue
  name=${target#floor_}
  src=megatrain/tests/floors/$name.c
  header=$(sed -nE 's/^#include "([^"]+)".*/\1/p' "$src" | tail -n 1)
  cmake --build "$B" --target "$target" > "$TMP/$name.log" 2>&1
  rc=$?
  if [[ $name == *__ok ]]; then
    n_ok=$((n_ok + 1))
    check "$name: builds (exit $rc): $(grep -m1 -E 'error' "$TMP/$name.log")" test $rc -eq 0
  else
    n_wrong=$((n_wrong + 1))
    check "$name: including $header across a floor fails the build" test $rc -ne 0
    check "$name: fails because $header is not found, not for another reason" \
      grep -qE "$header.*(No such file|not found)|(No such file|not found).*$header" "$TMP/$name.log"
  fi
done < "$list"
check "at least one probe that must build ($n_ok)" test $n_ok -ge 1
check "at least six wrong-way probes ($n_wrong)" test $n_wrong -ge 6
finish
