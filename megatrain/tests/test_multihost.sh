#!/usr/bin/env bash
# Several hosts under `mpirun -np 2` on the cpu backend (engine/hosts.h; here both "hosts" are
# this machine): each process holds its own host state and trains its half of the global
# batch; each unit's gradient is summed across the hosts in host order before the norm, so
# - with one rank per host and G = 1 the run is bitwise the one-process `--gpus 2` run
#   (parameters, moments, losses), every precision;
# - otherwise (ranks per host > 1, or G > 1: the hosts' sums are added, not the micro-batches
#   one after the other) within the tolerance of test_multigpu (1e-5 fp32, 5e-3 bf16 gradients);
# - checkpoints pass between mpirun and one process, bitwise;
# - host 0 alone writes stdout and --save.
# Skipped (exit 77) where mpirun is missing or megatrain was built without MPI.
source "$(dirname "$0")/lib.sh"

need_mpi test_multihost
MPI=(mpirun -np 2)

run() { # run OUTDIR ARGS... (one process)
  local out=$1; shift
  "$MT" train "$@" --data $FIX/tokens.bin --seq-len 32 --lr 1e-3 --backend cpu --save "$out" \
    > "$out.jsonl" 2> "$out.err" || { cat "$out.err" >&2; return 1; }
}
mrun() { # mrun OUTDIR ARGS... (two hosts)
  local out=$1; shift
  "${MPI[@]}" "$MT" train "$@" --data $FIX/tokens.bin --seq-len 32 --lr 1e-3 --backend cpu --save "$out" \
    > "$out.jsonl" 2> "$out.err" || { cat "$out.err" >&2; return 1; }
}
losses() { jq -r '"\(.step) \(.loss) \(.grad_norm) \(.skipped)"' "$1"; }
same_losses() { test "$(losses "$1.jsonl")" = "$(losses "$2.jsonl")"; }

tiny5="--config $DATA/tiny5_llama.json --seed 7 --steps 3"
for prec in fp32 paper mixed; do
  tol=5e-3; [ $prec = fp32 ] && tol=1e-5
  # The state whole on every host (sharded: test_multihost_shard): norms too are the one process's, bitwise.
  check "2 hosts, G=1 ($prec)" mrun "$TMP/h_$prec" $tiny5 --precision $prec --batch 4 --shard-optimizer off
  check "one process --gpus 2 ($prec)" run "$TMP/p_$prec" $tiny5 --precision $prec --batch 4 --gpus 2 --speculative-step false
  check "2 hosts == one process --gpus 2 ($prec): bitwise" same_state "$TMP/h_$prec" "$TMP/p_$prec"
  check "2 hosts: losses and norms identical ($prec)" same_losses "$TMP/h_$prec" "$TMP/p_$prec"
  check "2 hosts x --gpus 2 ($prec)" mrun "$TMP/h4_$prec" $tiny5 --precision $prec --batch 8 --gpus 2
  check "one process --gpus 4 ($prec)" run "$TMP/p4_$prec" $tiny5 --precision $prec --batch 8 --gpus 4 --speculative-step false
  check "2 hosts x --gpus 2 vs --gpus 4 ($prec): within $tol" close_params "$TMP/h4_$prec" "$TMP/p4_$prec" $tol
  check "2 hosts, G=2 ($prec)" mrun "$TMP/hg_$prec" $tiny5 --precision $prec --batch 4 --grad-accum 2
  check "one process --gpus 2, G=2 ($prec)" run "$TMP/pg_$prec" $tiny5 --precision $prec --batch 4 --grad-accum 2 --gpus 2 \
    --speculative-step false
  check "2 hosts, G=2 vs one process ($prec): within $tol" close_params "$TMP/hg_$prec" "$TMP/pg_$prec" $tol
done
check "host 0 alone writes stdout (3 lines)" test "$(wc -l < "$TMP/h_fp32.jsonl")" = 3
check "stderr says the hosts" grep -q "2 hosts (MPI): the speculative step is off" "$TMP/h_fp32.err"

# Checkpoints between mpirun and one process (G = 1, one rank per host: the same arithmetic).
full=(--config $DATA/tiny5_llama.json --seed 7 --precision paper --batch 4 --speculative-step false)
check "uninterrupted, one process --gpus 2" run "$TMP/ref" "${full[@]}" --steps 6 --gpus 2
check "first half under mpirun" mrun "$TMP/half_h" "${full[@]}" --steps 3
"$MT" train --resume "$TMP/half_h" --steps 6 --gpus 2 --save "$TMP/res_p" > "$TMP/res_p.jsonl" 2> /dev/null
check "resumed by one process --gpus 2" test $? -eq 0
check "mpirun's checkpoint resumed by one process == uninterrupted: bitwise" same_state "$TMP/res_p" "$TMP/ref"
check "first half, one process" run "$TMP/half_p" "${full[@]}" --steps 3 --gpus 2
"${MPI[@]}" "$MT" train --resume "$TMP/half_p" --steps 6 --save "$TMP/res_h" > "$TMP/res_h.jsonl" 2> /dev/null
check "resumed under mpirun" test $? -eq 0
check "one process's checkpoint resumed under mpirun == uninterrupted: bitwise" same_state "$TMP/res_h" "$TMP/ref"
check "resumed under mpirun: losses of steps 4..6 identical" \
  test "$(losses "$TMP/res_h.jsonl")" = "$(losses "$TMP/ref.jsonl" | tail -n 3)"

# Bad input under mpirun: one line (from each host), non-zero exit.
"${MPI[@]}" "$MT" train $tiny5 --data $FIX/tokens.bin --seq-len 32 --backend cpu --batch 3 > /dev/null 2> "$TMP/bad.err"
check "--batch 3 on 2 hosts: non-zero exit" test $? -ne 0
check "--batch 3 on 2 hosts: says why" grep -q "is not divisible by 2 hosts" "$TMP/bad.err"
"${MPI[@]}" "$MT" train $tiny5 --data $FIX/tokens.bin --seq-len 32 --backend cpu --batch 4 --speculative-step true \
  > /dev/null 2> "$TMP/bad2.err"
check "--speculative-step true on 2 hosts: non-zero exit" test $? -ne 0
check "--speculative-step true on 2 hosts: says why" grep -q "speculative-step true with several hosts" "$TMP/bad2.err"
finish
