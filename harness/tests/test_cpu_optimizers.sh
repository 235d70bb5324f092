#!/usr/bin/env bash
# results/cpu_optimizers.jsonl (baselines/peers/cpu_optimizers.py, measured by hand: CI has
# neither torch nor DeepSpeed) holds what the peer models read: one row per implementation,
# medians with their min..max, bytes_per_s = 28 B x params_per_s, ratio_to_triad inside its
# range, one thread count and size for all, the env it ran in from a clean tree. The script
# refuses a bad command line (exit 2) and skips (77) where torch is missing. Needs jq.
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
  exits 2 "--repeats 0 refused" python3 baselines/peers/cpu_optimizers.py --repeats 0
  python3 -c "import torch" > /dev/null 2>&1 ||
    exits 77 "without torch the script skips" python3 baselines/peers/cpu_optimizers.py --out "$tmp/x.jsonl"
fi
finish
