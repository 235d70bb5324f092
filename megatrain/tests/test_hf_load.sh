#!/usr/bin/env bash
# transformers loads what --save writes: tied (tiny_llama) and untied (tiny_qwen2,
# tiny_qwen3) models, one model.safetensors and HF shards with their index, and its
# weights equal PyTorch's own trajectory (final_g1.safetensors, the tolerance of
# test_torch_parity); a paper-precision (BF16) sharded save loads bit for bit as the
# unsharded one; a config's eos_token_id list reaches transformers' config.
# Needs torch, transformers and safetensors: a python that imports them is taken from
# MT_HF_PYTHON, else the environment ci/install_hf_python.sh makes (CI installs it), else
# python3; without one the test is skipped (77), saying so.
source "$(dirname "$0")/lib.sh"

venv_py="${XDG_CACHE_HOME:-$HOME/.cache}/megatrain/hf-venv/bin/python"
PY=""
for p in "${MT_HF_PYTHON:-}" "$venv_py" python3; do
  if [ -n "$p" ] && "$p" -c "import torch, transformers, safetensors" > /dev/null 2>&1; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
  echo "test_hf_load: skipped: no python here imports torch, transformers and safetensors" \
       "(MT_HF_PYTHON, $venv_py, python3); 'bash ci/install_hf_python.sh' installs them (CI does)"
  exit 77
fi
echo "test_hf_load: $("$PY" -c 'import sys, torch, transformers; print(sys.executable, "torch", torch.__version__, "transformers", transformers.__version__)')"

hf_check() { # hf_check WHAT ARGS...: check_hf_load.py ARGS passes
  local what=$1; shift
  if "$PY" $FIX/check_hf_load.py "$@" > "$TMP/hf.log" 2>&1; then ok; else bad "$what: $(grep -v ' ok$' "$TMP/hf.log" | tail -n 5)"; fi
}

pairs=()
for m in tiny_llama tiny_qwen2 tiny_qwen3; do
  e=$FIX/$m/expected_g1.json
  hp=(--batch "$(jq .batch $e)" --seq-len "$(jq .seq_len $e)" --steps 8 --grad-accum 1 --lr "$(jq .lr $e)"
      --weight-decay "$(jq .weight_decay $e)" --beta1 "$(jq .beta1 $e)" --beta2 "$(jq .beta2 $e)"
      --eps "$(jq .eps $e)" --grad-clip "$(jq .grad_clip $e)")
  for layout in one sharded; do
    size=(); [ $layout = sharded ] && size=(--shard-size 100kB)
    "$MT" train --model $FIX/$m --data $FIX/tokens.bin "${hp[@]}" --backend cpu --precision fp32 "${size[@]}" \
      --save "$TMP/$m-$layout" > /dev/null 2> "$TMP/err"
    check "$m $layout: train and save ($(tail -n 1 "$TMP/err"))" test $? -eq 0
    pairs+=("$TMP/$m-$layout" "$FIX/$m/final_g1.safetensors")
  done
  check "$m: the sharded save has shards and an index" test -f "$TMP/$m-sharded/model.safetensors.index.json" \
    -a -f "$TMP/$m-sharded/model-00002-of-0000$(ls "$TMP/$m-sharded" | grep -c '^model-').safetensors"
done
hf_check "fp32 saves (tied and untied, one file and shards) vs PyTorch's final weights" "${pairs[@]}"

# BF16 files (paper precision): the sharded save loads exactly as the unsharded one.
for layout in one sharded; do
  size=(); [ $layout = sharded ] && size=(--shard-size 100kB)
  "$MT" train --model $FIX/tiny_qwen2 --data $FIX/tokens.bin --batch 2 --seq-len 32 --steps 3 --backend cpu \
    --precision paper "${size[@]}" --save "$TMP/paper-$layout" > /dev/null 2>&1
done
hf_check "paper precision: shards load bit for bit" "$TMP/paper-sharded" "$TMP/paper-one/model.safetensors" \
  "$TMP/paper-one" "$TMP/paper-one/model.safetensors" --rtol 0 --atol 0

# A config's fields survive the save into transformers' config.
mkdir -p "$TMP/cfg" && cp $FIX/tiny_llama/model.safetensors "$TMP/cfg/"
jq '.eos_token_id = [2, 7, 9]' $FIX/tiny_llama/config.json > "$TMP/cfg/config.json"
for layout in one sharded; do
  size=(); [ $layout = sharded ] && size=(--shard-size 100kB)
  "$MT" train --model "$TMP/cfg" --data $FIX/tokens.bin --batch 2 --seq-len 16 --steps 1 --backend cpu \
    "${size[@]}" --save "$TMP/cfg-$layout" > /dev/null 2>&1
done
hf_check "eos_token_id list in transformers' config" "$TMP/cfg-sharded" "$TMP/cfg-one/model.safetensors" \
  --config 'eos_token_id=[2, 7, 9]' --rtol 0 --atol 0
finish
