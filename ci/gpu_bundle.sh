#!/usr/bin/env bash
# gpu_bundle.sh: run HERE (the dev machine). Builds the CUDA-enabled binaries
# and gathers them, the kernel labs and the shared libraries the GPU machine
# lacks (it has CUDA but no cJSON, OpenBLAS, Google Benchmark) into
# .device/bundle.tar.xz, which the device tool carries:
#   run(command="bash ci/gpu_suite.sh", carry=[".device"])
# Topology falls back to sysfs there (no hwloc). Only the binaries the GPU run
# needs travel (the CPU tests are CI's), compressed: the carry limit is 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
B=.device/bundle
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMT_HWLOC=OFF > /dev/null
cmake --build "$BUILD" -j "$(nproc)"
rm -rf "$B"
mkdir -p "$B/bin" "$B/lib"
for exe in megatrain mt-env mt-topology mt-microbench test_cuda_ops test_cudnn_graph test_torch_parity; do
  cp "$BUILD/bin/$exe" "$B/bin/"
done
mkdir -p "$B/bin/lab" && cp "$BUILD"/bin/lab/* "$B/bin/lab/" # the kernel labs (CMake builds them)
strip --strip-unneeded "$B"/bin/* "$B"/bin/lab/* 2> /dev/null || true
# Shared libraries outside glibc/libstdc++ and CUDA (which the GPU machine has). cuDNN is
# not among them: it is loaded at run time (megatrain/backends/cuda/cudnn_api.h) and
# ci/gpu_suite.sh finds the one PyTorch's wheel brings there.
for f in "$B"/bin/* "$B"/bin/lab/*; do [ -f "$f" ] && ldd "$f" 2> /dev/null | awk '/=>/ {print $3}'; done | sort -u |
  grep -E 'libcjson|libopenblas|libgfortran|libquadmath|libgomp|libbenchmark' | while read -r lib; do
  cp -L "$lib" "$B/lib/"
done
git rev-parse --short=12 HEAD > "$B/GIT_SHA"
{ git diff --quiet && git diff --cached --quiet; } && echo 0 > "$B/GIT_DIRTY" || echo 1 > "$B/GIT_DIRTY"
tar -C .device -cJf .device/bundle.tar.xz bundle
rm -rf "$B"
du -h .device/bundle.tar.xz | awk '{print "gpu_bundle: " $2 " is " $1 " (the device tool carries at most 64 MiB with the tree)"}' >&2
