#!/usr/bin/env bash
# gpu_bundle.sh: run HERE (the dev machine), from a clean committed tree. Builds the
# CUDA-enabled binaries and gathers them, the kernel labs and the shared libraries the
# GPU machine lacks (it has CUDA but no cJSON, OpenBLAS, Google Benchmark) into
# .device/bundle.tar.xz, which the device tool carries for the campaign:
#   run(command="bash ci/gpu_campaign.sh A", carry=[".device", ".whl"])
# Topology falls back to sysfs there (no hwloc). Only the binaries the GPU run
# needs travel (the CPU tests are CI's), compressed: the carry limit is 64 MiB for the
# tree and the carried paths together (the sizes are printed at the end).
# GIT_SHA, GIT_DIRTY and TREE (`git ls-files -s`) record the commit: the campaign marks
# its rows dirty when the carried tree differs from it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
B=.device/bundle
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMT_HWLOC=OFF -DMT_MPI=OFF > /dev/null # no libmpi there
cmake --build "$BUILD" -j "$(nproc)"
rm -rf "$B"
mkdir -p "$B/bin" "$B/lib"
for exe in megatrain mt-env mt-topology mt-microbench test_backend_ops test_cudnn_graph test_torch_parity; do
  cp "$BUILD/bin/$exe" "$B/bin/"
done
mkdir -p "$B/bin/lab" && cp "$BUILD"/bin/lab/* "$B/bin/lab/" # the kernel labs (CMake builds them)
strip --strip-unneeded "$B"/bin/* "$B"/bin/lab/* 2> /dev/null || true
# Shared libraries outside glibc/libstdc++ and CUDA (which the GPU machine has). cuDNN is
# not among them: it is loaded at run time (megatrain/backends/cuda/cudnn_api.h) and
# ci/gpu_campaign.sh finds the one PyTorch's wheel brings there.
for f in "$B"/bin/* "$B"/bin/lab/*; do [ -f "$f" ] && ldd "$f" 2> /dev/null | awk '/=>/ {print $3}'; done | sort -u |
  grep -E 'libcjson|libopenblas|libgfortran|libquadmath|libgomp|libbenchmark' | while read -r lib; do
  cp -L "$lib" "$B/lib/"
done
git rev-parse --short=12 HEAD > "$B/GIT_SHA"
git ls-files -s > "$B/TREE"
{ git diff --quiet && git diff --cached --quiet; } && echo 0 > "$B/GIT_DIRTY" || echo 1 > "$B/GIT_DIRTY"
tar -C .device -cJf .device/bundle.tar.xz bundle
rm -rf "$B"
# What the device tool sends: tracked and untracked-not-ignored files, plus the carried paths.
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
bundle=$(du -cb .device | tail -1 | cut -f1)
whl=$( [ -d .whl ] && du -cb .whl | tail -1 | cut -f1 || echo 0)
total=$((tree + bundle + whl))
awk -v b="$bundle" -v w="$whl" -v t="$tree" -v s="$total" 'BEGIN {m = 1048576; printf "gpu_bundle: .device %.1f MiB + .whl %.1f MiB + tree %.1f MiB = %.1f MiB of the 64 MiB the device tool carries\n", b / m, w / m, t / m, s / m}' >&2
[ "$total" -le $((64 << 20)) ] || { echo "gpu_bundle: over 64 MiB: the device tool will refuse the call" >&2; exit 1; }
