#!/usr/bin/env bash
# Several hosts at 2, 3 and 4 processes (engine/hosts_mpi.c, engine/host_shard.h): the sum is a
# reduce-scatter and an all-gather in rounds (MT_HOSTS_CHUNK_BYTES=64 here: many rounds per unit,
# slices cut mid-round), each host updates the optimizer state of its slice only
# (--shard-optimizer hosts, the default) and the updated parameters are all-gathered, so
# - the optimizer worker all-gathers each unit as it updates it (MPI_THREAD_MULTIPLE), or with
#   MT_HOSTS_ONE_THREAD=1 the step gathers every unit after the update: the same bits;
# - with one rank per host and G = 1 the run is bitwise the one-process `--gpus H` run
#   (parameters, moments, losses, norms), sharded or not;
# - a checkpoint saved by 4 hosts resumes in one process bitwise, and 2 hosts load it (resharded)
#   and save it back bitwise; one saved by one process resumes on 4 hosts bitwise.
# Skipped (exit 77) where mpirun is missing or megatrain was built without MPI.
source "$(dirname "$0")/lib.sh"

need_mpi test_multihost_shard
export MT_HOSTS_CHUNK_BYTES=64

common=(--data $FIX/tokens.bin --seq-len 32 --lr 1e-3 --backend cpu --seed 7 --speculative-step false)
# run OUTDIR ARGS / mrun NP OUTDIR ARGS: lib.sh, with `common`.
losses() { jq -r '"\(.step) \(.loss) \(.grad_norm) \(.skipped)"' "$1"; }
# Losses identical; the norm's slices' sums of squares are added in another association (1e-12).
same_losses() {
  jq -s -e --slurpfile b "$2.jsonl" '. as $a | length == ($b | length) and all(range(length); . as $i |
    $a[$i].loss == $b[$i].loss and $a[$i].skipped == $b[$i].skipped and
    (($a[$i].grad_norm - $b[$i].grad_norm) | fabs) <= 1e-12 * $b[$i].grad_norm)' "$1.jsonl" > /dev/null
}

tiny5=(--config $DATA/tiny5_llama.json --steps 3 --grad-clip 2)
for np in 2 3 4; do
  for prec in paper fp32; do
    b=$((np * 1))
    check "$np hosts, sharded ($prec)" mrun $np "$TMP/h${np}_$prec" "${tiny5[@]}" --precision $prec --batch $b
    check "one process --gpus $np ($prec)" run "$TMP/p${np}_$prec" "${tiny5[@]}" --precision $prec --batch $b --gpus $np
    check "$np hosts sharded == one process --gpus $np ($prec): bitwise" same_state "$TMP/h${np}_$prec" "$TMP/p${np}_$prec"
    check "$np hosts: losses identical, norms within 1e-12 ($prec)" same_losses "$TMP/h${np}_$prec" "$TMP/p${np}_$prec"
  done
done
MT_HOSTS_ONE_THREAD=1 mrun 3 "$TMP/h3_one" "${tiny5[@]}" --precision paper --batch 3
check "3 hosts, MPI with one thread (the step gathers after the update)" test $? -eq 0
check "... bitwise the worker's gather" same_state "$TMP/h3_one" "$TMP/h3_paper"
check "stderr says the state and the gradients are sharded" \
  grep -q "4 hosts: the optimizer state and the gradients' sum are sharded" "$TMP/h4_fp32.err"
check "MPI with one thread: the gradients stay whole (the step sums them)" \
  grep -q "3 hosts: the optimizer state is sharded, each host keeps 1/3 of it" "$TMP/h3_one.err"

# G micro-batches: each unit's micro-batch is summed across hosts as it lands (collective_hosts.c),
# micro-batch after micro-batch in host order, as one process's --gpus H adds its ranks: bitwise.
for prec in paper mixed; do
  check "2 hosts, --grad-accum 3 ($prec)" mrun 2 "$TMP/g2_$prec" "${tiny5[@]}" --precision $prec --batch 2 --grad-accum 3
  check "one process --gpus 2 --grad-accum 3 ($prec)" run "$TMP/pg2_$prec" "${tiny5[@]}" --precision $prec --batch 2 \
    --grad-accum 3 --gpus 2
  check "2 hosts == one process --gpus 2 at G = 3 ($prec): bitwise" same_state "$TMP/g2_$prec" "$TMP/pg2_$prec"
  check "... losses identical, norms within 1e-12 ($prec)" same_losses "$TMP/g2_$prec" "$TMP/pg2_$prec"
done
MT_HOSTS_ONE_THREAD=1 mrun 2 "$TMP/g2_one" "${tiny5[@]}" --precision paper --batch 2 --grad-accum 3
check "2 hosts at G = 3, one MPI thread (each host sums its micro-batches first)" test $? -eq 0
check "... within 5e-3 of the micro-batch-ordered sum" close_params "$TMP/g2_one" "$TMP/g2_paper" 5e-3
check "3 hosts, --shard-optimizer off" mrun 3 "$TMP/h3_off" "${tiny5[@]}" --precision mixed --batch 3 --shard-optimizer off
check "3 hosts, sharded (mixed)" mrun 3 "$TMP/h3_mixed" "${tiny5[@]}" --precision mixed --batch 3
check "3 hosts: sharded == not sharded (mixed, f32 master): bitwise" same_state "$TMP/h3_mixed" "$TMP/h3_off"
mpirun -np 2 "$MT" train "${common[@]}" "${tiny5[@]}" --batch 2 --shard-optimizer yes > /dev/null 2> "$TMP/bad.err"
check "--shard-optimizer yes: non-zero exit" test $? -ne 0
check "--shard-optimizer yes: says why" grep -q "shard-optimizer yes: expected hosts or off" "$TMP/bad.err"

mpirun -np 2 "$MT" train "${common[@]}" "${tiny5[@]}" --batch 2 --dump-grads "$TMP/g.safetensors" > /dev/null 2> "$TMP/dg.err"
check "--dump-grads sharded: non-zero exit" test $? -ne 0
check "--dump-grads sharded: says why and the remedy" grep -q "dump-grads with the optimizer state sharded.*--shard-optimizer off" "$TMP/dg.err"
check "--dump-grads sharded: no file" test ! -e "$TMP/g.safetensors"

check "3 hosts, a save every step (each served by the others)" mrun 3 "$TMP/h3_every" "${tiny5[@]}" --precision paper \
  --batch 3 --save-every 1
check "... the last save bitwise the one at the end alone" same_state "$TMP/h3_every" "$TMP/h3_paper"

# Checkpoints across host counts (each host writes its slices, engine/host_shard_save.h; any count
# loads them; test_multihost_ckpt tests the layout itself).
full=(--config $DATA/tiny5_llama.json --precision paper --batch 4)
check "uninterrupted, one process --gpus 4" run "$TMP/ref" "${full[@]}" --steps 6 --gpus 4
check "first half on 4 hosts" mrun 4 "$TMP/half4" "${full[@]}" --steps 3
"$MT" train --resume "$TMP/half4" --steps 6 --gpus 4 --save "$TMP/res1" > "$TMP/res1.jsonl" 2> /dev/null
check "4 hosts' checkpoint resumed by one process" test $? -eq 0
check "4 hosts' checkpoint resumed by one process == uninterrupted: bitwise" same_state "$TMP/res1" "$TMP/ref"
mpirun -np 2 "$MT" train --resume "$TMP/half4" --steps 3 --save "$TMP/re2" > /dev/null 2> "$TMP/re2.err"
check "4 hosts' checkpoint loaded by 2 hosts and saved back" test $? -eq 0
check "... bitwise the 4 hosts' (resharded both ways)" same_state "$TMP/re2" "$TMP/half4"
mpirun -np 2 "$MT" train --resume "$TMP/half4" --steps 6 --gpus 2 --save "$TMP/res2" > "$TMP/res2.jsonl" 2> /dev/null
check "4 hosts' checkpoint resumed by 2 hosts x --gpus 2" test $? -eq 0
check "... within 5e-3 of uninterrupted (2 ranks a host sum in another order)" close_params "$TMP/res2" "$TMP/ref" 5e-3
check "first half, one process" run "$TMP/half1" "${full[@]}" --steps 3 --gpus 4
mpirun -np 4 "$MT" train --resume "$TMP/half1" --steps 6 --save "$TMP/res4" > "$TMP/res4.jsonl" 2> /dev/null
check "one process's checkpoint resumed on 4 hosts" test $? -eq 0
check "... == uninterrupted: bitwise" same_state "$TMP/res4" "$TMP/ref"
tail -n 3 "$TMP/ref.jsonl" > "$TMP/ref_tail.jsonl"
check "... losses of steps 4..6 identical, norms within 1e-12" same_losses "$TMP/res4" "$TMP/ref_tail"
finish
