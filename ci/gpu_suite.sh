#!/usr/bin/env bash
# gpu_suite.sh: run ON the GPU machine from the repo root, with the bundle that
# ci/gpu_bundle.sh built here (the GPU machine has CUDA but not our other
# libraries, so nothing is built there):
#   device run: command="bash ci/gpu_suite.sh", carry=[".device"]
# Runs the CUDA op tests against the CPU backend, compute-sanitizer memcheck and
# racecheck, the kernel labs (attention native vs cuDNN vs PyTorch SDPA at 1k-128k
# tokens), and the link/GEMM microbenchmarks. Logs and JSON
# go to $OUT (or ./gpu_suite_logs). Exit status 0 only if everything passed.
set -u
ROOT=$(pwd)
LOGS=${OUT:-$ROOT/gpu_suite_logs}
mkdir -p "$LOGS"
fail=0
step() { echo "== $*" | tee -a "$LOGS/summary.txt"; }

if [ ! -f .device/bundle.tar.xz ]; then
  echo "gpu_suite: .device/bundle.tar.xz missing: run 'bash ci/gpu_bundle.sh' on the dev machine and carry .device" >&2
  exit 1
fi
BUNDLE=/tmp/mt_bundle
rm -rf "$BUNDLE" && mkdir -p "$BUNDLE" && tar -C "$BUNDLE" --strip-components=1 -xJf .device/bundle.tar.xz
# CUDA's own libraries come from the machine's toolkit (or PyTorch's nvidia wheels).
cuda_libs=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH="$BUNDLE/lib:${cuda_libs}${LD_LIBRARY_PATH:-}"
# cuDNN is dlopen'ed (libcudnn.so.9, megatrain/backends/cuda/cudnn_api.h), so ldd cannot
# report it missing: look for it on the loader's path, else take the wheels' directories
# (nvidia/cudnn/lib from nvidia-cudnn-cu13, and nvrtc/cuBLAS beside it), as for the rest.
cudnn_found() {
  local d
  for d in ${LD_LIBRARY_PATH//:/ }; do [ -e "$d/libcudnn.so.9" ] && return 0; done
  ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9 '
}
if ldd "$BUNDLE/bin/megatrain" | grep -q "not found" || ! cudnn_found; then
  wheel_libs=$(python3 -c "import glob,os,nvidia; print(':'.join(sorted({os.path.dirname(p) for p in glob.glob(os.path.join(os.path.dirname(nvidia.__path__[0]), 'nvidia', '*', 'lib', '*.so*'))})))" 2>/dev/null)
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$wheel_libs"
fi
ldd "$BUNDLE/bin/megatrain" | grep "not found" | tee -a "$LOGS/summary.txt"
cudnn_found || echo "WARNING: libcudnn.so.9 not found: attention runs on the native kernels" | tee -a "$LOGS/summary.txt"
export MT_BIN="$BUNDLE/bin" MT_GIT_SHA=$(cat "$BUNDLE/GIT_SHA") MT_GIT_DIRTY=$(cat "$BUNDLE/GIT_DIRTY")
BIN=$BUNDLE/bin

nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1 || echo "nvidia-smi unavailable" >> "$LOGS/summary.txt"
"$BIN/megatrain" --version | tee -a "$LOGS/summary.txt"
"$BIN/mt-env" > "$LOGS/env.json" 2>> "$LOGS/summary.txt" || true

step "test_cudnn_graph (the attention graphs finalized by this machine's cuDNN, no GPU needed)"
"$BIN/test_cudnn_graph" > "$LOGS/test_cudnn_graph.log" 2>&1 || fail=1
tail -2 "$LOGS/test_cudnn_graph.log" | tee -a "$LOGS/summary.txt"

step "test_cuda_ops (each op vs the CPU backend; attention native and cuDNN)"
MT_REQUIRE_CUDNN=1 MT_TEST_VERBOSE=1 "$BIN/test_cuda_ops" > "$LOGS/test_cuda_ops.log" 2>&1
rc=$?
tail -3 "$LOGS/test_cuda_ops.log" | tee -a "$LOGS/summary.txt"
if [ $rc = 77 ]; then echo "WARNING: skipped: no CUDA device visible" | tee -a "$LOGS/summary.txt"; fail=1
elif [ $rc != 0 ]; then fail=1; fi

SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SAN" ]; then
  # --no-deliberate-errors: without the checks that provoke CUDA API errors on purpose
  # (the 1 PiB cudaMalloc of the out-of-memory check), so any error reported is real;
  # the full run above keeps those checks.
  for tool in memcheck racecheck; do
    step "compute-sanitizer $tool test_cuda_ops --no-deliberate-errors"
    "$SAN" --tool $tool --error-exitcode 99 "$BIN/test_cuda_ops" --no-deliberate-errors > "$LOGS/$tool.log" 2>&1 || fail=1
    tail -3 "$LOGS/$tool.log" | tee -a "$LOGS/summary.txt"
  done
else
  echo "compute-sanitizer not found" | tee -a "$LOGS/summary.txt"
  fail=1
fi

step "whole model on CUDA vs PyTorch/HF (tiny Llama/Qwen2/Qwen3, fp32 and paper, G=1,2)"
MT_PARITY_BACKEND=cuda "$BIN/test_torch_parity" > "$LOGS/parity_cuda.log" 2>&1 || fail=1
tail -2 "$LOGS/parity_cuda.log" | tee -a "$LOGS/summary.txt"

step "throughput smoke: Qwen2.5-7B width, 4 layers, batch 16 x 1024, paper, each schedule"
python3 -c "import json; c=json.load(open('experiments/models/qwen2.5-7b.json')); c['num_hidden_layers']=4; json.dump(c, open('/tmp/q7b4.json','w'))"
for sched in megatrain zero3 naive; do
  "$BIN/megatrain" train --config /tmp/q7b4.json --data synthetic --backend cuda --precision paper --batch 16 \
    --seq-len 1024 --steps 8 --schedule $sched > "$LOGS/smoke_$sched.jsonl" 2> "$LOGS/smoke_$sched.err" || fail=1
  tail -1 "$LOGS/smoke_$sched.jsonl" | cut -c1-400 | tee -a "$LOGS/summary.txt"
done
for attn in native cudnn; do # the same megatrain step with each attention implementation
  "$BIN/megatrain" train --config /tmp/q7b4.json --data synthetic --backend cuda --precision paper --batch 16 \
    --seq-len 1024 --steps 8 --attention $attn > "$LOGS/smoke_attn_$attn.jsonl" 2> "$LOGS/smoke_attn_$attn.err" || fail=1
  tail -1 "$LOGS/smoke_attn_$attn.jsonl" | cut -c1-400 | tee -a "$LOGS/summary.txt"
done

step "kernel labs (each version vs a CPU reference, timed; GB/s and % of peak for the memory-bound ones)"
for lab in attention rmsnorm add_rmsnorm elementwise xent rope swiglu embedding; do
  "$BIN/lab/$lab" > "$LOGS/lab_$lab.txt" 2>&1 || fail=1
  cat "$LOGS/lab_$lab.txt" >> "$LOGS/summary.txt"
done

step "attention at 1k-128k tokens (Qwen2.5-7B heads): native vs cuDNN (lab), PyTorch SDPA (torch_reference.py)"
"$BIN/lab/attention" --sweep 28 4 128 > "$LOGS/lab_attention_sweep.jsonl" 2>&1 || fail=1
cat "$LOGS/lab_attention_sweep.jsonl" >> "$LOGS/summary.txt"
python3 megatrain/backends/cuda/lab/torch_reference.py > "$LOGS/torch_reference.jsonl" 2>&1 || fail=1
tail -30 "$LOGS/torch_reference.jsonl" >> "$LOGS/summary.txt"

step "microbenchmarks: host<->device copies, GEMMs, host AdamW, triad"
"$BIN/mt-microbench" --benchmark_min_time=0.2 --benchmark_out="$LOGS/microbench.json" \
  --benchmark_out_format=json > "$LOGS/microbench.txt" 2>&1 || fail=1
tail -40 "$LOGS/microbench.txt" >> "$LOGS/summary.txt"
step "calibrate the profile from microbench.json (harness/calibrate_profile.py)"; b=h100-128g; grep -qs H200 "$LOGS/nvidia-smi.txt" && b=h200-128g; python3 harness/calibrate_profile.py "experiments/hardware/$b.json" "$LOGS/microbench.json" --out "$LOGS/$b.json" 2>&1 | tee -a "$LOGS/summary.txt"; [ "${PIPESTATUS[0]}" = 0 ] || fail=1

step "result: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
