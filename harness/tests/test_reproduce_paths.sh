#!/usr/bin/env bash
# experiments/reproduce.sh takes MT_RESULTS and MT_BIN as paths of any characters, never as
# code: with a results folder named with an apostrophe and a '$(...)', the environment and
# microbenchmark steps write their files into that folder and nothing the name spells runs
# (the binaries and python are stubs here: only the script's own quoting is under test).
. "$(dirname "$0")/lib.sh"

for name in "r'\$(touch $tmp/pwned)'x" "it's here" 'a "quoted" $(touch pwned2) name'; do
  rm -rf "$tmp/bin" "$tmp/pwned" && mkdir -p "$tmp/bin"
  printf '#!/bin/sh\n[ "$1" = --version ] && echo %s\nexit 0\n' "'{\"backends\":[\"cpu\"]}'" > "$tmp/bin/megatrain"
  printf '#!/bin/sh\necho %s\n' "'{\"stub\":1}'" > "$tmp/bin/mt-env"
  printf '#!/bin/sh\necho %s\n' "'{\"benchmarks\":[]}'" > "$tmp/bin/mt-microbench"
  printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/python"  # every python step a no-op
  chmod +x "$tmp/bin"/*
  R=$tmp/$name
  (cd "$tmp" && MT_BIN="$tmp/bin" MT_RESULTS="$R" PYTHON="$tmp/bin/python" \
     bash "$OLDPWD/experiments/reproduce.sh" --cpu --no-plots) > "$tmp/out" 2> "$tmp/err"
  host=$(hostname -s 2>/dev/null || echo host)
  if [ ! -e "$tmp/pwned" ] && [ ! -e "$tmp/pwned2" ] && [ ! -e pwned2 ] && [ "$(cat "$R/env_$host.json" 2>/dev/null)" = '{"stub":1}' ] &&
     [ "$(cat "$R/microbench_$host.json" 2>/dev/null)" = '{"benchmarks":[]}' ] && ! ls "$R"/*.tmp > /dev/null 2>&1; then
    pass "MT_RESULTS=$name: env and microbench files written there, nothing run"
  else
    fail "MT_RESULTS=$name"; grep -i "fail\|error" "$tmp/err" | head -5; ls -la "$tmp" | head
  fi
done
finish
