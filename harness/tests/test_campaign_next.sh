#!/usr/bin/env bash
# `gpu_campaign.sh next` (issue 23): in one call, the highest-priority parts not yet filed for
# this GPU that fit the budget it states, at most 2 (each packs 4 files; 8 come back). Planned
# here with --next-plan against a made-up results/campaign/ (a filed manifest per part; a dry
# run's does not count); a filed part whose sweeps lack rows from this GPU kind is completed.
. "$(dirname "$0")/lib.sh"
[ -x "$MT_BIN/megatrain" ] || { echo "skipped: no $MT_BIN/megatrain"; exit 77; }
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
man() { # man TAG PART DRY: a filed manifest
  printf '{"schema": "megatrain.gpu_campaign/1", "part": "%s", "tag": "%s", "dry_run": %s}\n' "$2" "$1-$2" "$3" \
    > "$tmp/c/$1-$2-20261126T000000Z-manifest.json"
}
# every configuration of every part's sweeps filed from an H200 and an H100: a filed part is
# then complete (the completions are checked further down)
mkdir -p "$tmp/c" "$tmp/full"
python3 -c '
import json, os, sys
from ci.gpu_campaign import main, parts, estimate
for p in parts.PARTS:
    for st in p["steps"]:
        if st["kind"] == "sweep":
            s = estimate.sweeps.load(os.path.join(main.REPO, st["sweep"]))
            with open(os.path.join(sys.argv[1], s["experiment"] + ".jsonl"), "w") as f:
                for c in estimate.sweeps.expand(s):
                    for g in ("NVIDIA H200", "NVIDIA H100 80GB HBM3"):
                        f.write(json.dumps({"experiment": s["experiment"], "config_key": estimate.sweeps.config_key(c),
                                            "env": {"gpu_name": g}}) + "\n")
' "$tmp/full"
plan() { bash ci/gpu_campaign.sh --next-plan "$1" --budget "$2" --campaign-dir "$tmp/c" --results-dir "$tmp/full" 2>&1; }
c2() { man "$1" C2a false; man "$1" C2b false; }  # C2's two calls filed: the parts after them are planned
# C2 first (issue 37): its two parts each alone in a call (they share one lease), C2b once C2a is filed
out=$(plan "NVIDIA H200" 5000)
check "nothing filed: C2a alone, however large the budget: $out" \
  'printf "%s" "$out" | grep -Eq "filed already: none; within 5000 s: C2a \(~[0-9]+ s\)$"'
man h200 C2a false
out=$(plan "NVIDIA H200" 5000)
check "C2a filed: C2b alone: $out" 'printf "%s" "$out" | grep -Eq "filed already: C2a; within 5000 s: C2b \(~[0-9]+ s\)$"'
man h200 C2b false
man h200 A false; man h200 V false; man h200 W false; man h200 B false; man h200 C true   # C only as a dry run: not filed
out=$(plan "NVIDIA H200" 900)
check "H200 with C2, A, V, W and B filed: I, then C (a dry run's manifest does not count): $out" \
  'printf "%s" "$out" | grep -q "filed already: A, B, C2a, C2b, V, W; within 900 s: I (~[0-9]* s), C (~"'
check "at most 2 parts in one call: $out" '[ "$(printf "%s" "$out" | grep -o "(~[0-9]* s)" | wc -l)" -le 2 ]'
c2 h100
out=$(plan "NVIDIA H100 80GB HBM3" 5000)
check "only C2 filed for the H100: A and V (the sim's validation rows again, issue 41), and no third however large the budget: $out" \
  'printf "%s" "$out" | grep -Eq "filed already: C2a, C2b; within 5000 s: A \(~[0-9]+ s\), V \(~[0-9]+ s\)$"'
out=$(plan "NVIDIA H100 80GB HBM3" 60)
check "a budget nothing fits: said: $out" 'printf "%s" "$out" | grep -q "within 60 s: nothing fits"'
for p in A V W B C D E F G H I C2a C2b; do man h100 $p false; done
out=$(plan "NVIDIA H100 80GB HBM3" 900)
check "every part filed: nothing to run: $out" 'printf "%s" "$out" | grep -q "nothing fits"'
# A filed part A whose microbench lacks a family the step now runs (gemm_bwd/cuda, added since
# the H200 ran it) is completed by running its microbench again, alone (with its calibration);
# with every family filed it is not.
rm -f "$tmp/c"/*; man h200 A false; c2 h200
mkdir -p "$tmp/mb"
cp "$tmp/full"/*.jsonl "$tmp/mb/"
python3 -c '
import json, sys
from ci.gpu_campaign import parts
fams = [f for f in parts.MICROBENCH_FAMILIES if f != sys.argv[2]]
json.dump({"benchmarks": [{"name": f + "/1/real_time"} for f in fams]}, open(sys.argv[1], "w"))' \
  "$tmp/mb/microbench_h200-A.json" gemm_bwd/cuda
out=$(bash ci/gpu_campaign.sh --next-plan "NVIDIA H200" --budget 5000 --campaign-dir "$tmp/c" --results-dir "$tmp/mb" 2>&1)
check "A filed, its microbench without gemm_bwd: completed by its microbench again: $out" \
  'printf "%s" "$out" | grep -q "within 5000 s: A (~[0-9]* s, completing it: microbench again (its filed run lacks gemm_bwd/cuda))"'
# the H200's filed part A predates launch/cuda (issue 41: launch latency, the shortest kernel)
python3 -c '
import json, sys
from ci.gpu_campaign import parts
json.dump({"benchmarks": [{"name": f + "/1/real_time"} for f in parts.MICROBENCH_FAMILIES if f != "launch/cuda"]},
          open(sys.argv[1], "w"))' "$tmp/mb/microbench_h200-A.json"
out=$(bash ci/gpu_campaign.sh --next-plan "NVIDIA H200" --budget 5000 --campaign-dir "$tmp/c" --results-dir "$tmp/mb" 2>&1)
check "A filed, its microbench without launch/cuda: completed by its microbench again, then V: $out" \
  'printf "%s" "$out" | grep -q "within 5000 s: A (~[0-9]* s, completing it: microbench again (its filed run lacks launch/cuda)), V (~"'
python3 -c '
import json, sys
from ci.gpu_campaign import parts
json.dump({"benchmarks": [{"name": f + "/1/real_time"} for f in parts.MICROBENCH_FAMILIES]}, open(sys.argv[1], "w"))' \
  "$tmp/mb/microbench_h200-A.json"
out=$(bash ci/gpu_campaign.sh --next-plan "NVIDIA H200" --budget 5000 --campaign-dir "$tmp/c" --results-dir "$tmp/mb" 2>&1)
check "A filed with every microbench family: not run again, V next: $out" \
  'printf "%s" "$out" | grep -q "filed already: A, C2a, C2b; within 5000 s: V (~"'
# A filed manifest or microbench file that is not strict JSON (a NaN, a repeated key, a list)
# stops the plan with one line naming it (exit 2), never a traceback, nor the part silently
# counted as never run and planned again
for bad in '{"part": "A", "dry_run": NaN}' '{"part": "A", "part": "B", "dry_run": false}' '[{"part": "A"}]'; do
  rm -f "$tmp/c"/*; man h200 B false; printf '%s\n' "$bad" > "$tmp/c/h200-A-20261126T000000Z-manifest.json"
  out=$(plan "NVIDIA H200" 900); rc=$?
  check "a filed manifest $bad: refused, named (exit $rc): $out" \
    '[ $rc = 2 ] && printf "%s" "$out" | grep -q "h200-A-20261126T000000Z-manifest.json" && ! printf "%s" "$out" | grep -q Traceback'
done
rm -f "$tmp/c"/*; man h200 A false; c2 h200  # C2 filed: the plan reaches A and reads its microbench
for bad in '{"benchmarks": [{"name": "x", "x": Infinity}]}' '{"benchmarks": "gemm"}' '{"benchmarks": [["gemm"]]}'; do
  printf '%s\n' "$bad" > "$tmp/mb/microbench_h200-A.json"
  out=$(bash ci/gpu_campaign.sh --next-plan "NVIDIA H200" --budget 5000 --campaign-dir "$tmp/c" --results-dir "$tmp/mb" 2>&1); rc=$?
  check "a filed microbench $bad: refused, named (exit $rc): $out" \
    '[ $rc = 2 ] && printf "%s" "$out" | grep -q "microbench_h200-A.json" && ! printf "%s" "$out" | grep -q Traceback'
done
rm -f "$tmp/mb/microbench_h200-A.json"
# $MT_CAMPAIGN_T0 is read as strictly as an option: a value that is not epoch seconds is an
# error naming it (exit 2), before anything in --out is touched
for v in abc nan inf -5; do
  rm -rf "$tmp/t0"
  MT_CAMPAIGN_T0=$v python3 -m ci.gpu_campaign.main run A --dry-run --out "$tmp/t0" > /dev/null 2> "$tmp/t0.err"; rc=$?
  check "MT_CAMPAIGN_T0=$v: refused naming it (exit $rc)" \
    '[ $rc = 2 ] && grep -q "MT_CAMPAIGN_T0" "$tmp/t0.err" && [ ! -e "$tmp/t0" ] && ! grep -q Traceback "$tmp/t0.err"'
done
# ... and as a CPU dry run: part A's completion runs its setup and microbench steps only
rm -f "$tmp/c"/*; man gpu A false; man gpu B false; man gpu I false; c2 gpu
python3 -c '
import json, sys
from ci.gpu_campaign import parts
json.dump({"benchmarks": [{"name": f + "/1/real_time"} for f in parts.MICROBENCH_FAMILIES if f != "kernel/cuda"]},
          open(sys.argv[1], "w"))' "$tmp/mb/microbench_gpu-A.json"
for f in "$tmp/full"/*.jsonl; do jq -c '.env.gpu_name = null' "$f" > "$tmp/mb/$(basename "$f")"; done
MT_BIN=$MT_BIN python3 -m ci.gpu_campaign.main next --dry-run --out "$tmp/ma" --budget 300 --campaign-dir "$tmp/c" \
  --results-dir "$tmp/mb" > "$tmp/ma.log" 2>&1; rc=$?
check "next --dry-run completes A by its microbench: exit $rc, steps machine and microbench, the manifest says why" \
  '[ $rc = 0 ] && [ "$(jq -r ".steps[].name" "$tmp/ma/A/A-manifest.json" | paste -sd, -)" = "machine,microbench" ] &&
   jq -e ".completion.microbench == [\"kernel/cuda\"]" "$tmp/ma/A/A-manifest.json" > /dev/null'
# A filed part whose sweep lacks rows from this GPU kind (a configuration never reached, one
# that errored, one measured on another GPU) is completed: those configurations only, led by
# the sweep's first one (the same-run reference), the setup steps before them.
rm -f "$tmp/c"/*; man h200 A false; man h200 V false; man h200 W false; man h200 B false; c2 h200
mkdir -p "$tmp/r"
cp "$tmp/full/gpu_width.jsonl" "$tmp/full/gpu_revalidate.jsonl" "$tmp/r/"  # V and W filed and complete: not the subject here
python3 -m harness.sweep.run --dry-run experiments/sweeps/gpu_c2_deepspeed.json 2>/dev/null | cut -f3 > "$tmp/b.keys"
python3 -m harness.sweep.run --dry-run experiments/sweeps/gpu_goal.json 2>/dev/null | cut -f3 > "$tmp/a.keys"
row() { jq -nc --arg k "$1" --arg g "$2" --arg e "$3" '{experiment: $e, config_key: $k, env: {gpu_name: $g}}'; }
for k in $(cat "$tmp/a.keys"); do row "$k" "NVIDIA H200" gpu_goal; done > "$tmp/r/gpu_goal.jsonl"
cp "$tmp/full/gpu_c2_matched.jsonl" "$tmp/r/"  # C2 complete: B's completion is next
{ i=0; for k in $(cat "$tmp/b.keys"); do i=$((i + 1))
    case $i in 2) row "$k" "NVIDIA H200" gpu_c2_deepspeed | jq -c '.error = "exit 1"' ;;  # errored
               3) row "$k" "NVIDIA H100 80GB HBM3" gpu_c2_deepspeed ;;                   # another GPU's
               4) ;;                                                                       # never reached
               *) row "$k" "NVIDIA H200" gpu_c2_deepspeed ;; esac; done; } > "$tmp/r/gpu_c2_deepspeed.jsonl"
out=$(bash ci/gpu_campaign.sh --next-plan "NVIDIA H200" --budget 540 --campaign-dir "$tmp/c" --results-dir "$tmp/r" 2>&1)
check "B filed but 3 of its configurations lack an H200 row: completed (3 + its first): $out" \
  'printf "%s" "$out" | grep -q "within 540 s: B (~[0-9]* s, completing it: 4 configuration(s) of gpu_c2_deepspeed)"'
for k in $(cat "$tmp/b.keys"); do row "$k" "NVIDIA H200" gpu_c2_deepspeed; done > "$tmp/r/gpu_c2_deepspeed.jsonl"
out=$(bash ci/gpu_campaign.sh --next-plan "NVIDIA H200" --budget 540 --campaign-dir "$tmp/c" --results-dir "$tmp/r" 2>&1)
check "B with every configuration filed from the H200: I next: $out" 'printf "%s" "$out" | grep -q "within 540 s: I (~"'
# the completion as a CPU dry run (no GPU: its rows carry no GPU name): B's first configuration
# (the megatrain reference) and the missing ones; the peers' are left out of a dry run as always
rm -f "$tmp/c"/*; man gpu A false; man gpu V false; man gpu W false; man gpu B false; c2 gpu
jq -c '.env.gpu_name = null' "$tmp/full/gpu_width.jsonl" > "$tmp/r/gpu_width.jsonl"
jq -c '.env.gpu_name = null' "$tmp/full/gpu_revalidate.jsonl" > "$tmp/r/gpu_revalidate.jsonl"
for k in $(cat "$tmp/a.keys"); do row "$k" "" gpu_goal | jq -c '.env.gpu_name = null'; done > "$tmp/r/gpu_goal.jsonl"
jq -c '.env.gpu_name = null' "$tmp/full/gpu_c2_matched.jsonl" > "$tmp/r/gpu_c2_matched.jsonl"
sed -n 1,4p "$tmp/b.keys" | while read -r k; do row "$k" "" gpu_c2_deepspeed | jq -c '.env.gpu_name = null'; done \
  > "$tmp/r/gpu_c2_deepspeed.jsonl"
MT_BIN=$MT_BIN python3 -m ci.gpu_campaign.main next --dry-run --out "$tmp/m" --budget 540 --campaign-dir "$tmp/c" \
  --results-dir "$tmp/r" > "$tmp/m.log" 2>&1; rc=$?
mkdir -p "$tmp/mx" && tar -C "$tmp/mx" -xzf "$tmp/m/B/B-results.tar.gz" 2>/dev/null
check "next --dry-run completes B: exit $rc, its manifest names the configurations, the rows are the reference and the one missing non-peer configuration (megatrain mixed)" \
  '[ $rc = 0 ] && jq -e --arg first "$(head -1 "$tmp/b.keys")" ".completion.gpu_c2_deepspeed[0] == \$first and (.completion.gpu_c2_deepspeed | length) == 5" "$tmp/m/B/B-manifest.json" > /dev/null &&
   [ "$(jq -s "length" "$tmp/mx/rows/gpu_c2_deepspeed.jsonl")" = 2 ] &&
   ! jq -e "select(.step_ms == null)" "$tmp/mx/rows/gpu_c2_deepspeed.jsonl" > /dev/null &&
   [ "$(jq -r ".steps[].name" "$tmp/m/B/B-manifest.json" | paste -sd, -)" = "machine,peers_setup,gpu_c2_deepspeed" ]'
bash ci/gpu_campaign.sh --next-plan > /dev/null 2>&1
check "--next-plan without a GPU name: exit 2" '[ $? = 2 ]'
# The run itself, as CPU dry runs: each chosen part packed in its own folder, 4 files each.
bash ci/gpu_campaign.sh --dry-run next --out "$tmp/n" --budget 900 > "$tmp/n.log" 2>&1
rc=$?
check "next --dry-run: exit $rc, part C2a alone packed in OUT/C2a, its batch-16 share of the sweep only" \
  '[ $rc = 0 ] && [ -f "$tmp/n/C2a/C2a-manifest.json" ] && [ "$(ls "$tmp/n")" = C2a ] &&
   grep -q "5 configuration(s) of experiments/sweeps/gpu_c2_matched.json (where {\"batch\": \[16\]})" "$tmp/n.log"'
# C2 measures megatrain with and without its split (issue 44) at 16 and 64, beside DeepSpeed's own ratio
python3 -m harness.sweep.run --dry-run experiments/sweeps/gpu_c2_matched.json 2>/dev/null | cut -f4 > "$tmp/c2.names"
check "C2's sweep: megatrain at 16 and 64 with the split off and with --device-optimizer auto, DeepSpeed's ratio" \
  '[ "$(grep -cE "^qwen2.5-14b megatrain b(16|64) T1024 mixed cuda L8$" "$tmp/c2.names")" = 2 ] &&
   [ "$(grep -cE "^qwen2.5-14b megatrain b(16|64) T1024 mixed cuda L8 devopt-auto$" "$tmp/c2.names")" = 2 ] &&
   [ "$(grep -c "ratio0.5$" "$tmp/c2.names")" = 2 ] &&
   jq -e ".configs[] | select(.variant == \"devopt-auto\") | .args == [\"--device-optimizer\", \"auto\"]" \
     experiments/sweeps/gpu_c2_matched.json > /dev/null'
check "at most 8 files come back: $(find "$tmp/n" -type f | wc -l)" '[ "$(find "$tmp/n" -type f | wc -l)" -le 8 ]'
bash ci/gpu_campaign.sh --file "$tmp/n" > "$tmp/f.log" 2>&1
check "--file finds a part per folder (here refusing the dry run)" \
  '[ "$(grep -c "a dry run (tiny CPU rows): not filed" "$tmp/f.log")" = 1 ]'
# a C2 part's completion is its own share of the sweep: C2a filed with every row but one of its
# DeepSpeed points completes those (and the sweep's first, the same-run reference), never C2b's
rm -f "$tmp/c"/*; man h200 C2a false
python3 -m harness.sweep.run --dry-run experiments/sweeps/gpu_c2_matched.json 2>/dev/null | cut -f3 > "$tmp/c2.keys"
sed -n 3p "$tmp/c2.keys" > "$tmp/c2.miss"
grep -v -f "$tmp/c2.miss" "$tmp/c2.keys" | head -4 | while read -r k; do row "$k" "NVIDIA H200" gpu_c2_matched; done \
  > "$tmp/r/gpu_c2_matched.jsonl"
out=$(bash ci/gpu_campaign.sh --next-plan "NVIDIA H200" --budget 540 --campaign-dir "$tmp/c" --results-dir "$tmp/r" 2>&1)
check "C2a filed without one of its batch-16 rows: completed alone, that one and the reference: $out" \
  'printf "%s" "$out" | grep -Eq "within 540 s: C2a \(~[0-9]+ s, completing it: 2 configuration\(s\) of gpu_c2_matched\)$"'
finish
