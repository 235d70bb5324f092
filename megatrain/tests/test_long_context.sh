#!/usr/bin/env bash
# A 16k-token sequence trains on a tiny model with peak host memory far below
# one T x T f32 attention matrix (tiled attention, chunked loss head).
source "$(dirname "$0")/lib.sh"

T=16384
"$MT" train --config $DATA/long_context_tiny.json --data synthetic --batch 1 --seq-len $T --steps 2 \
  --backend cpu --schedule megatrain > "$TMP/long.jsonl" 2> "$TMP/long.err"
check "16k-token run exits 0" test $? -eq 0
check "16k-token run logged 2 steps" test "$(jq -s length "$TMP/long.jsonl")" = 2
check "loss is finite and near ln(256) at init" jq -s -e '.[0].loss > 5.0 and .[0].loss < 6.0' "$TMP/long.jsonl" > /dev/null
peak=$(tail -n 1 "$TMP/long.jsonl" | jq .peak_rss_bytes)
matrix=$((T * T * 4))
echo "peak host RSS $peak bytes; one T x T f32 matrix is $matrix bytes" >&2
check "peak RSS ($peak) < 1/4 of one T x T matrix ($matrix)" test "$peak" -lt $((matrix / 4))
finish
