#!/usr/bin/env bash
# One host-memory check before anything is allocated (issue 31): everything the run
# will hold, the model state, the pinned slabs and staging, the speculative copies and,
# on the CPU backend, the device buffers (host memory there too), against what is
# available. MT_HOST_MEM_LIMIT stands in for a smaller machine.
source "$(dirname "$0")/lib.sh"

# A 3B-wide, 1-layer model: a 4.3 GiB state in paper precision, never allocated here.
jq '.num_hidden_layers = 1 | .max_window_layers = 1' experiments/models/qwen2.5-3b.json > "$TMP/m.json"
run=(train --config "$TMP/m.json" --backend cpu --precision paper --batch 1 --seq-len 64 --steps 1)

# refused RUN...: exit 1, one stderr line, nothing on stdout, quickly and small (nothing allocated)
refused() {
  local what=$1; shift
  /usr/bin/time -f "%e %M" -o "$TMP/time" "$MT" "$@" > "$TMP/out" 2> "$TMP/err"
  local rc=$? secs kb
  read -r secs kb < <(tail -1 "$TMP/time") # time says "Command exited with ..." first
  check "$what: exit 1 (got $rc)" test "$rc" = 1
  check "$what: one stderr line ($(wc -l < "$TMP/err"))" test "$(wc -l < "$TMP/err")" = 1
  check "$what: says nothing was allocated: $(cat "$TMP/err")" grep -q "nothing was allocated" "$TMP/err"
  check "$what: nothing on stdout" test ! -s "$TMP/out"
  check "$what: peak RSS $kb KB < 1 GiB" test "$kb" -lt 1048576
  check "$what: refused in $secs s" awk -v s="$secs" 'BEGIN { exit !(s < 20) }'
}

# figure WORDS: the size after WORDS in the error, in bytes (each figure carries its unit: bytes, KiB, MiB, GiB)
figure() {
  sed -n "s/.*$1 \([0-9.]*\) \(bytes\|KiB\|MiB\|GiB\).*/\1 \2/p" "$TMP/err" |
    awk '{ u["bytes"] = 1; u["KiB"] = 2^10; u["MiB"] = 2^20; u["GiB"] = 2^30; printf "%.0f", $1 * u[$2] }'
}
MT_HOST_MEM_LIMIT=1000000 refused "1 MB" "${run[@]}"
# The figures it names: the whole need, and the state alone.
need=$(figure "needs") state=$(figure "model state") dev=$(figure "device buffers in host memory")
check "the error names the need ($need), the state ($state) and the device buffers ($dev), in bytes" \
  awk -v n="$need" -v s="$state" -v d="$dev" 'BEGIN { exit !(n > s + d - 0.01 * 2^30 && s > 4 * 2^30 && d > 0) }'

# Room for the state but not for the rest: the old check (the state alone) let it start
# and the kernel killed it later; now it is refused before anything is allocated.
between=$(awk -v n="$need" -v s="$state" 'BEGIN { printf "%.0f", s + (n - s) / 2 }')
MT_HOST_MEM_LIMIT=$between refused "state fits, the rest does not" "${run[@]}"
# eval makes the same check.
MT_HOST_MEM_LIMIT=1000000 refused "eval" eval --model $FIX/tiny_llama --data $FIX/tokens.bin --backend cpu \
  --batch 2 --seq-len 16 --steps 1
# A tiny run's refusal shows its figures in the unit their size calls for, not "0.00 GiB" (issue: polish).
tiny=(train --model $FIX/tiny_llama --data $FIX/tokens.bin --backend cpu --batch 2 --seq-len 16 --steps 1)
MT_HOST_MEM_LIMIT=100000 refused "tiny run under 100 kB" "${tiny[@]}"
need=$(figure "needs") state=$(figure "model state") avail=$(figure "but")
check "tiny run: need $need, state $state and available $avail bytes are all shown nonzero: $(cat "$TMP/err")" \
  awk -v n="$need" -v s="$state" -v a="$avail" 'BEGIN { exit !(n > s && s > 0 && a > 90000 && a < 110000) }'
check "tiny run: no figure reads as zero of a large unit" test -z "$(grep -oE ' 0\.0* [KMG]iB' "$TMP/err")"
check "tiny run: the limit is shown in KiB" grep -qF "(MT_HOST_MEM_LIMIT 97.7 KiB)" "$TMP/err"
# A run that fits is not refused by it (the tiny fixture, well under the limit).
MT_HOST_MEM_LIMIT=$((8 << 30)) "$MT" train --model $FIX/tiny_llama --data $FIX/tokens.bin --backend cpu --batch 2 \
  --seq-len 16 --steps 1 > "$TMP/out" 2> "$TMP/err"
check "a run that fits trains: $(tail -1 "$TMP/err")" test "$(jq -s length "$TMP/out")" = 1
finish
