#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, once. Quiet when all
# are present, so `make` stays fast on a machine that has them.
set -euo pipefail
# openmpi-bin, libopenmpi-dev: several hosts (MPI) and its test under mpirun (test_multihost)
pkgs=(cmake pkg-config libopenblas-dev libcjson-dev zlib1g-dev libhwloc-dev libbenchmark-dev jq gnuplot-nox time
      openmpi-bin libopenmpi-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
# torch + transformers for test_hf_load: in CI (about 2 minutes, ~3 GB from PyPI) or on request.
if [ "${CI:-}" = true ] || [ "${MT_INSTALL_HF:-}" = 1 ]; then
  bash "$(dirname "$0")/install_hf_python.sh"
fi
