#!/usr/bin/env bash
# results/peer_hooks.jsonl (baselines/peers/stage3_hooks.py, measured by hand: CI has
# neither DeepSpeed nor the peers' venv) holds what the peer models' hook time comes
# from: DeepSpeed ZeRO-3 and FSDP2, fwd_bwd and fwd, each a positive median inside its
# range over >= 5 rounds, fetch_overhead_ms = the per-layer hook time over the fetches our
# model charges a layer, DeepSpeed's forward fetching each module of a layer once and
# FSDP2's once per layer, the env it ran in from a clean tree; and `megatrain plan
# --peer` carries the fwd_bwd medians (engine/peer.c) and names the file as their source.
# The script refuses a bad command line (exit 2) and skips (77) where torch is missing.
# Needs jq and megatrain ($MT_BIN).
. "$(dirname "$0")/lib.sh" jq
MT=${MT_BIN:-build/bin}/megatrain
[ -x "$MT" ] || { echo "skipped: $MT not built"; exit 77; }
f=results/peer_hooks.jsonl
[ -s "$f" ] || { echo "FAIL $f missing"; exit 1; }

if jq -s -e '
  def rng($v; $r): ($r | length == 2) and $r[0] <= $v and $v <= $r[1];
  (map(.system + "/" + .pass) | sort) == ["deepspeed-zero3/fwd","deepspeed-zero3/fwd_bwd","fsdp2-offload/fwd","fsdp2-offload/fwd_bwd"]
  and all(.[]; .schema == "megatrain.peer_hooks/1"
    and .fetch_overhead_ms > 0 and .fetch_overhead_ms < 1000 and rng(.fetch_overhead_ms; .fetch_overhead_ms_range)
    and rng(.hook_ms_per_layer.median; [.hook_ms_per_layer.min, .hook_ms_per_layer.max])
    and ((.fetch_overhead_ms * .model_fetches_per_layer - .hook_ms_per_layer.median) | fabs) <= 1e-9 * .hook_ms_per_layer.median
    and .model_fetches_per_layer == {"deepspeed-zero3/fwd_bwd": 12, "deepspeed-zero3/fwd": 6,
                                     "fsdp2-offload/fwd_bwd": 2, "fsdp2-offload/fwd": 1}[.system + "/" + .pass]
    and ((.ms_per_call * .calls_per_layer - .hook_ms_per_layer.median) | fabs) <= 1e-9 * .hook_ms_per_layer.median
    and .rounds >= 5 and .steps >= 5 and (.model.depths | length == 2)
    and (.env.cpu_model | type == "string") and (.env.cpu_cores | type == "number")
    and (.env.torch | type == "string") and (.env.deepspeed | type == "string")
    and (.env.load_avg_1min | length) == .rounds + 1
    and .env.git_dirty == false and (.env.git_sha | type == "string"))
  and all(.[] | select(.pass == "fwd" and .system == "deepspeed-zero3"); .calls_per_layer == .modules_per_layer)
  and all(.[] | select(.pass == "fwd" and .system == "fsdp2-offload"); .calls_per_layer == 1)
  and all(.[] | select(.pass == "fwd_bwd"); .calls_per_layer > 1)' "$f" > /dev/null; then
  echo "ok   $f: both peers, both passes, positive medians inside their ranges, per-layer fetch counts as the frameworks' own, clean tree"
else
  fail "$f does not hold the four rows as baselines/peers/stage3_hooks.py writes them"
fi

# engine/peer.c's constants are the measured fwd_bwd medians (rounded to 1 us), and plan names their source.
for p in deepspeed-zero3 fsdp2-offload; do
  want=$(jq -s --arg p "$p" '.[] | select(.system == $p and .pass == "fwd_bwd") | .fetch_overhead_ms' "$f")
  got=$("$MT" plan --config experiments/models/qwen2.5-7b.json --batch 8 --seq-len 1024 --hardware h100-128g \
        --peer $p | jq -c '[.peer.fetch_overhead_ms, .peer.fetch_overhead_source]')
  if jq -n -e --argjson w "${want:-null}" --argjson g "$got" \
       '$w != null and (($g[0] - $w) | fabs) <= 0.0005 + 1e-12 and ($g[1] | startswith("measured: results/peer_hooks.jsonl"))' > /dev/null; then
    echo "ok   plan --peer $p: fetch_overhead_ms $got = the measured median $want"
  else
    fail "plan --peer $p gives $got, the measured median in $f is ${want:-missing} (engine/peer.c)"
  fi
done

if command -v python3 > /dev/null; then
  exits 2 "--rounds 0 refused" python3 -m baselines.peers.stage3_hooks --rounds 0
  exits 2 "--depths 4,2 refused" python3 -m baselines.peers.stage3_hooks --depths 4,2
  python3 -c "import torch" > /dev/null 2>&1 ||
    exits 77 "without torch the script skips" python3 -m baselines.peers.stage3_hooks --out "$tmp/x.jsonl"
fi
finish
