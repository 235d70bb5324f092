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

# Chunked execution changes only the summation order: same loss and gradient
# norm (fp32 tolerance) with the MLP in 512-token chunks and all at once.
run_chunk() { # run_chunk OUT MLP_CHUNK
  "$MT" train --config $DATA/long_context_tiny.json --data synthetic --batch 1 --seq-len 4096 --steps 3 --lr 1e-3 \
    --backend cpu --mlp-chunk "$2" > "$1" 2>/dev/null
}
run_chunk "$TMP/c0.jsonl" 0 && run_chunk "$TMP/c512.jsonl" 512
check "chunked runs exit 0" test $? -eq 0
close=$(jq -s -r --slurpfile b "$TMP/c512.jsonl" '[range(length) as $i | (.[$i].loss - $b[$i].loss | fabs) / .[$i].loss,
  (.[$i].grad_norm - $b[$i].grad_norm | fabs) / .[$i].grad_norm] | max < 1e-5' "$TMP/c0.jsonl")
check "loss and grad norm agree with and without MLP chunking (rel < 1e-5)" test "$close" = true

# Peak memory grows linearly in T: going 8k -> 16k -> 32k adds about the same
# per token each time (a T x T term would quadruple the second increment).
peak_at() {
  "$MT" train --config $DATA/long_context_tiny.json --data synthetic --batch 1 --seq-len "$1" --steps 1 \
    --backend cpu --mlp-chunk 1024 2>/dev/null | jq .peak_rss_bytes
}
p1=$(peak_at 8192) p2=$(peak_at 16384) p3=$(peak_at 32768)
echo "peak RSS at 8k/16k/32k tokens: $p1 $p2 $p3" >&2
linear=$(jq -n --argjson a "$p1" --argjson b "$p2" --argjson c "$p3" '(($c - $b) / ($b - $a)) as $r | $r > 1.4 and $r < 2.8')
check "peak RSS increments grow ~2x per doubling of T (linear), not 4x ($p1, $p2, $p3)" test "$linear" = true
finish
