#!/usr/bin/env bash
# --gpus N on cuda (NCCL), for a machine with two or more GPUs; skipped (77) elsewhere:
# - with one GPU: --gpus 2 is refused in one line naming the count (checked, then skipped);
# - with two: --gpus 2 at batch 4 against one GPU running the same 2 x 2 rows as micro-batches,
#   parameters within the bf16 tolerance of test_multigpu (5e-3 relative L2; NCCL sums in its
#   own order), losses finite, and --gpus 3 on two GPUs refused.
# NCCL is loaded at run time: MT_NCCL_LIBRARY, else the loader's search, else PyTorch's wheel.
source "$(dirname "$0")/lib.sh"

if [ "$("$MT" --version | jq '.backends | index("cuda")')" = null ]; then
  echo "test_multigpu_cuda: skipped: built without CUDA"
  exit 77
fi
gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
if [ "$gpus" -lt 1 ]; then
  echo "test_multigpu_cuda: skipped: no GPU"
  exit 77
fi
base=(train --config $DATA/tiny5_llama.json --seed 7 --data $FIX/tokens.bin --seq-len 32 --steps 3 --lr 1e-3
      --backend cuda --precision paper)
if [ "$gpus" -lt 2 ]; then
  expect 2 "--gpus 2: --backend cuda has 1 device here" "${base[@]}" --batch 4 --gpus 2
  [ "$failed" -eq 0 ] || finish
  echo "test_multigpu_cuda: skipped: needs 2 GPUs (found 1; the refusal of --gpus 2 was checked)"
  exit 77
fi
if [ -z "${MT_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2> /dev/null | grep -q libnccl.so.2; then
  lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2> /dev/null)
  [ -n "$lib" ] && [ -f "$lib" ] && export MT_NCCL_LIBRARY=$lib
fi
"$MT" "${base[@]}" --batch 4 --gpus 2 --save "$TMP/n2" > "$TMP/n2.jsonl" 2> "$TMP/n2.err"
check "--gpus 2 on cuda: $(tail -n 1 "$TMP/n2.err")" test $? -eq 0
"$MT" "${base[@]}" --batch 2 --grad-accum 2 --save "$TMP/r" > "$TMP/r.jsonl" 2> "$TMP/r.err"
check "one GPU, 2 micro-batches of 2 rows" test $? -eq 0
check "--gpus 2: finite losses" test "$(jq -s 'map(.loss | isinfinite or isnan) | any' "$TMP/n2.jsonl")" = false
check "--gpus 2 vs one GPU: within 5e-3" python3 - "$TMP/n2/model.safetensors" "$TMP/r/model.safetensors" <<'PY'
import json, math, struct, sys
def load(p):
    b = open(p, "rb").read(); n = int.from_bytes(b[:8], "little"); h = json.loads(b[8:8 + n]); out = {}
    for k, t in h.items():
        if k == "__metadata__": continue
        s, e = t["data_offsets"]; raw = b[8 + n + s:8 + n + e]
        out[k] = [struct.unpack("<f", struct.pack("<I", x << 16))[0] for x in struct.unpack("<%dH" % (len(raw) // 2), raw)]
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
d2 = sum((x - y) ** 2 for k in b for x, y in zip(a[k], b[k])); n2 = sum(y * y for k in b for y in b[k])
print("relative L2 difference %.3g (tolerance 5e-3)" % math.sqrt(d2 / n2), file=sys.stderr)
sys.exit(0 if math.sqrt(d2 / n2) <= 5e-3 else 1)
PY
[ "$gpus" -eq 2 ] && expect 2 "--gpus 3: --backend cuda has 2 devices here" "${base[@]}" --batch 6 --gpus 3
finish
