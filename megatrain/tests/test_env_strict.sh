#!/usr/bin/env bash
# Every environment variable megatrain reads is parsed as strictly as an option (core/env.h,
# cli/env_check.c): a value it cannot read is one stderr line naming the variable and the
# value, exit 2, before anything runs; never a silent default (atoi's 0 of garbage).
source "$(dirname "$0")/lib.sh"

run=(train --model $FIX/tiny_llama --data $FIX/tokens.bin --backend cpu --batch 2 --seq-len 16 --steps 1)
bad=(
  "MT_SIMD=foo" "MT_SIMD=AVX2" "MT_HOST_MEM_LIMIT=abc" "MT_HOST_MEM_LIMIT=-1" "MT_HOST_MEM_LIMIT=8GiB"
  "MT_HOST_MEM_LIMIT=0" "MT_HOST_MEM_LIMIT= 5" "MT_HOST_MEM_LIMIT=99999999999999999999999" "MT_CUDA_DEVICE=x"
  "MT_CUDA_DEVICE=-1" "MT_CUDA_SYNC=fast" "MT_PIN=never" "MT_GEMM_FALLBACK=2" "MT_ATTN_SIMPLE=maybe"
  "MT_CUDNN_DETERMINISTIC=si" "MT_FAULT_NO_EXCHANGE=please" "MT_FAULT_NO_SPACE_CHECK=x" "MT_FAULT_READ_PAUSE_MS=1s"
  "MT_FAULT_KILL_AT=nowhere" "MT_FAULT_TERM_AT=aside" "MT_FAULT_KILL_AT=staged:0" "MT_FAULT_KILL_AT=staged:x" "MT_HARDWARE_DIR=/nonexistent/hw"
  "OMPI_COMM_WORLD_SIZE=two" "PMI_SIZE=0" "MT_HOSTS_CHUNK_BYTES=8" "MT_HOSTS_CHUNK_BYTES=64k" "MT_HOSTS_ONE_THREAD=x" "MT_SIM_VALIDATION=$(printf 'a\nb')"
  # Read by libgomp and OpenBLAS, which took garbage silently as "every core".
  "OMP_NUM_THREADS=abc" "OMP_NUM_THREADS=-2" "OMP_NUM_THREADS=0" "OMP_NUM_THREADS=2 " "OMP_NUM_THREADS=2,"
  "OMP_NUM_THREADS=1e3" "OPENBLAS_NUM_THREADS=x" "OPENBLAS_NUM_THREADS=0x4" "OPENBLAS_NUM_THREADS=99999999999"
  "GOTO_NUM_THREADS=-1"
  # Set by megatrain's own restart under ulimit -v (cli/blas_fit.c): read leniently before, as "not fitted".
  "MT_BLAS_FITTED=abc" "MT_BLAS_FITTED=3x" "MT_BLAS_FITTED=-1" "MT_BLAS_FITTED=" "MT_BLAS_FITTED=0"
)
for kv in "${bad[@]}"; do
  name=${kv%%=*}
  env "$kv" "$MT" "${run[@]}" > "$TMP/out" 2> "$TMP/err"
  rc=$?
  shown=$(head -c 60 "$TMP/err")
  check "$name bad value ($shown): exit 2 (got $rc)" test "$rc" = 2
  # (libgomp says its own word on a bad OMP_NUM_THREADS as it loads, before megatrain runs)
  check "$name: one stderr line" test "$(grep -cv '^libgomp: \|^$' "$TMP/err")" = 1 -a "$(wc -l < "$TMP/err")" -le 3
  check "$name: the line names the variable: $shown" grep -q "$name=" "$TMP/err"
  check "$name: nothing on stdout" test ! -s "$TMP/out"
done
for v in abc 3x -1 ""; do # says what it expects, even set empty (env.h's unset for the others)
  MT_BLAS_FITTED=$v "$MT" plan --config $DATA/tiny5_llama.json > /dev/null 2> "$TMP/err"
  check "MT_BLAS_FITTED='$v': plan refuses it too, expecting a count: $(head -c 160 "$TMP/err")" \
    grep -q "MT_BLAS_FITTED=.*expected a whole number in 1\.\.1048576" "$TMP/err"
done
# Read the same way by eval and plan, before anything else.
MT_SIMD=bogus "$MT" eval --model $FIX/tiny_llama --data $FIX/tokens.bin --backend cpu --batch 2 --seq-len 16 \
  > /dev/null 2> "$TMP/err"
rc=$?
check "eval: exit 2 on a bad MT_SIMD (got $rc)" test "$rc" = 2
check "eval: names it" grep -q "MT_SIMD=bogus" "$TMP/err"
# Values it can read still run: the forms each parser takes, and empty as unset.
good=("MT_SIMD=scalar" "MT_HOST_MEM_LIMIT=$((8 << 30))" "MT_HOST_MEM_LIMIT=" "MT_FAULT_NO_EXCHANGE=0"
  "MT_GEMM_FALLBACK=true" "MT_CUDA_SYNC=spin" "MT_FAULT_KILL_AT=moved-aside:3" "OMP_NUM_THREADS=2,1"
  "OMP_NUM_THREADS=1" "OPENBLAS_NUM_THREADS=1" "OMP_NUM_THREADS=" "MT_BLAS_FITTED=4")
for kv in "${good[@]}"; do
  env "$kv" "$MT" "${run[@]}" > "$TMP/out" 2> "$TMP/err"
  check "$kv runs: $(tail -1 "$TMP/err")" test "$(jq -s length "$TMP/out")" = 1
done
finish
