#!/usr/bin/env bash
# results/cpu_optimizers.jsonl (baselines/peers/cpu_optimizers.py, measured by hand: CI has
# neither torch nor DeepSpeed) holds what the peer models read: one row per implementation,
# medians with their min..max, bytes_per_s = 28 B x params_per_s, ratio_to_triad inside its
# range, one thread count and size for all, the env it ran in from a clean tree. The script
# refuses a bad command line (exit 2) and skips (77) where torch is missing. --layouts (the
# campaign's cpu_adam step): its rows from made-up rounds, and ours with the bound run here
# (--no-peers). Needs jq.
. "$(dirname "$0")/lib.sh" jq
f=results/cpu_optimizers.jsonl
[ -s "$f" ] || { echo "FAIL $f missing"; exit 1; }

if jq -s -e '
  def rng($v; $r): ($r | length == 2) and $r[0] > 0 and $r[0] <= $v and $v <= $r[1];
  (map(.impl) | sort) == ["deepspeed_cpu_adam","megatrain_adamw","torch_adamw_foreach","torch_adamw_fused"]
  and all(.[]; .schema == "megatrain.cpu_optimizers/1"
    and rng(.params_per_s; .params_per_s_range) and rng(.bytes_per_s; .bytes_per_s_range)
    and rng(.triad_gb_s; .triad_gb_s_range) and rng(.ratio_to_triad; .ratio_to_triad_range)
    and .bytes_per_param == 28 and ((.bytes_per_s - 28 * .params_per_s) | fabs) <= 1e-9 * .bytes_per_s
    and (.threads | type == "number") and .threads >= 1 and .n_params >= 1048576 and .repeats >= 3
    and (.env.cpu_model | type == "string") and (.env.torch | type == "string")
    and (.env.deepspeed | type == "string") and .env.git_dirty == false and (.env.git_sha | type == "string"))
  and (map(.threads) | unique | length) == 1 and (map(.n_params) | unique | length) == 1
  and (map(.triad_gb_s) | unique | length) == 1' "$f" > /dev/null; then
  echo "ok   $f: four implementations, medians inside their ranges, 28 B/param, one thread count, clean tree"
else
  fail "$f does not hold the four rows as baselines/peers/cpu_optimizers.py writes them"
fi

if command -v python3 > /dev/null; then
  exits 2 "--repeats 0 refused" python3 -m baselines.peers.cpu_optimizers --repeats 0
  exits 2 "--no-peers without --layouts refused" python3 -m baselines.peers.cpu_optimizers --no-peers
  python3 -c "import torch" > /dev/null 2>&1 ||
    exits 77 "without torch the script skips" python3 -m baselines.peers.cpu_optimizers --out "$tmp/x.jsonl"

  # --layouts, the campaign's cpu_adam step: the rows from made-up rounds (DeepSpeed's included, which
  # CI cannot run): each implementation's layout and hardware bytes (write-allocate counted), GB/s at
  # those bytes, the triad's bound at 32 B/element, ours over DeepSpeed in the mixed layout only;
  # --n auto holds 8x the last-level cache in the smallest layout
  if python3 - > "$tmp/unit.txt" 2>&1 <<'PY'
import sys
from baselines.peers import cpu_optimizers as C
rounds = [{"triad": 24e9, "pps": {"megatrain_adamw_mixed": 1.2e9, "deepspeed_cpu_adam_mixed": 1.0e9,
                                  "megatrain_adamw_paper": 1.5e9, "deepspeed_cpu_adam": 1.1e9}},
          {"triad": 12e9, "pps": {"megatrain_adamw_mixed": 0.6e9, "deepspeed_cpu_adam_mixed": 0.4e9,
                                  "megatrain_adamw_paper": 0.7e9, "deepspeed_cpu_adam": 0.5e9}}]
rows = {r["impl"]: r for r in C.layout_rows(rounds, C.LAYOUT_IMPLS, 1 << 24, 16, 1 << 25, 2, {})}
om, dm, op, d = (rows[k] for k in ("megatrain_adamw_mixed", "deepspeed_cpu_adam_mixed", "megatrain_adamw_paper",
                                   "deepspeed_cpu_adam"))
near = lambda a, b: abs(a - b) <= 1e-9 * abs(b)
assert [om["layout"], dm["layout"], op["layout"]] == ["mixed", "mixed", "paper"], "layouts"
assert [r["bytes_per_param"] for r in (om, dm, op, d)] == [30, 36, 22, 28], "hardware bytes"
assert [r["bytes_per_param_rw"] for r in (om, dm, op, d)] == [28, 34, 22, 28], "reads + writes"
assert near(om["params_per_s"], 0.9e9) and near(om["bytes_per_s"], 0.9e9 * 30), "median, GB/s at 30 B"
assert near(om["triad_gb_s"], 24.0) and near(om["triad_stream_gb_s"], 18.0), "triad at 32 and 24 B/element"
assert near(om["bound_params_per_s"], 24e9 / 30) and near(dm["bound_params_per_s"], 24e9 / 36), "bound"
assert near(om["frac_of_bound"], (1.2e9 * 30 / 32e9 + 0.6e9 * 30 / 16e9) / 2), "fraction of the bound, per round"
assert near(om["ratio_to_deepspeed"], (1.2 + 1.5) / 2) and om["ratio_to_deepspeed_range"] == [1.2, 1.5], "ratio"
assert all("ratio_to_deepspeed" not in r for r in (dm, op, d)), "a ratio only in the same layout"
assert near(om["n_over_llc"], 16 * (1 << 24) / (1 << 25)), "working set over the cache"
n = C.default_n(True, 1 << 25)
assert n % 1024 == 0 and n * 12 >= 8 * (1 << 25) > (n - 1024) * 12, "auto n"
print("ok")
PY
  then pass "--layouts rows: layout, hardware bytes (30/36/22/28), GB/s, the triad bound at 32 B, ours/DeepSpeed in mixed only"
  else fail "--layouts rows: $(tail -3 "$tmp/unit.txt")"; fi
  # ours and the bound run here (CI has no torch): --no-peers, at a small n
  MB=${MT_BIN:-build/bin}/mt-microbench
  if [ -x "$MB" ]; then
    python3 -m baselines.peers.cpu_optimizers --layouts --no-peers --n 1048576 --repeats 1 --min-time 0.01 \
      --bin "$(dirname "$MB")" --out "$tmp/l.jsonl" > /dev/null 2> "$tmp/l.err"; rc=$?
    if [ "$rc" = 0 ] && jq -s -e '
         map(.impl) == ["megatrain_adamw_mixed", "megatrain_adamw_paper"] and map(.layout) == ["mixed", "paper"]
         and map(.bytes_per_param) == [30, 22]
         and all(.[]; .params_per_s > 0 and ((.bytes_per_s / .params_per_s - .bytes_per_param) | fabs) < 1e-6
           and ((.bound_params_per_s * .bytes_per_param / (.triad_gb_s * 1e9) - 1) | fabs) < 1e-9
           and .frac_of_bound > 0 and .triad_gb_s > .triad_stream_gb_s and (has("ratio_to_deepspeed") | not)
           and .threads >= 1 and .n_params == 1048576 and (.env.deepspeed == null))' "$tmp/l.jsonl" > /dev/null; then
      pass "--layouts --no-peers: ours mixed and paper measured, each with its bound"
    else fail "--layouts --no-peers (exit $rc): $(tail -3 "$tmp/l.err")"; fi
  else echo "note: $MB not built: --layouts --no-peers not run"; fi
fi
finish
