# golden_lib.sh: shared by make_sim_golden.sh and test_sim_golden.sh (sourced).
# golden_cases prints one command line per case (@SCHEDULES expands to the four
# schedules); golden_run runs one and prints its record as one JSON line:
# {"args": "...", "rc": N, "out": [stdout JSON objects], "err": "last stderr line" (on failure)}.
# Wall-clock fields (drain_wait_ms, peak_rss_bytes) are dropped: they are not the sim's.
golden_cases() {
  grep -v '^#' "$1" | grep -v '^ *$' | while read -r first rest; do
    if [ "$first" = "@SCHEDULES" ]; then
      for s in megatrain zero3 naive resident; do echo "$rest --schedule $s"; done
    else
      echo "$first $rest"
    fi
  done
}
golden_run() { # golden_run MEGATRAIN ARGS...
  local bin=$1; shift
  local out err rc
  out=$("$bin" "$@" 2> "$GOLDEN_TMP/err" < /dev/null) && rc=0 || rc=$?
  err=$(tail -n 1 "$GOLDEN_TMP/err")
  [ $rc -eq 0 ] && err=""
  printf '%s\n' "$out" | jq -s -c --arg args "$*" --argjson rc $rc --arg err "$err" \
    '{args: $args, rc: $rc, out: map(del(.drain_wait_ms, .peak_rss_bytes))} + (if $rc != 0 then {err: $err} else {} end)'
}
