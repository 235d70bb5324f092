#!/usr/bin/env bash
# Installs CPU-usable torch, transformers and safetensors from PyPI into one venv,
# ${XDG_CACHE_HOME:-~/.cache}/megatrain/hf-venv, for test_hf_load (transformers
# loading what --save writes). Called by install_deps.sh in CI (CI=true) or with
# MT_INSTALL_HF=1; by hand: bash ci/install_hf_python.sh. Quiet and idempotent: a
# venv that already imports the pinned versions is left alone. A failure (no
# network) warns and exits 0: test_hf_load then skips, saying why.
# Cost, measured on the 2-core dev VM: 2.9 GB of wheels downloaded in 45 s, installed
# in 65 s, 5.6 GB on disk (PyPI's Linux torch wheel carries the CUDA libraries; the
# CPU-only wheel index is not reachable from these machines).
# Versions: those the fixtures were made with (megatrain/tests/fixtures/README.md).
set -uo pipefail
pins=(torch==2.15.0 transformers==5.23.0 safetensors==0.8.0)
venv="${XDG_CACHE_HOME:-$HOME/.cache}/megatrain/hf-venv"
py="$venv/bin/python"
check='import torch, transformers, safetensors, sys; sys.exit(0 if (torch.__version__.split("+")[0], transformers.__version__, safetensors.__version__) == ("2.15.0", "5.23.0", "0.8.0") else 1)'
if [ -x "$py" ] && "$py" -c "$check" > /dev/null 2>&1; then exit 0; fi
warn() { echo "install_hf_python: $* (test_hf_load will skip)" >&2; exit 0; }
if ! python3 -c "import venv, ensurepip" > /dev/null 2>&1; then # Debian splits venv and pip out of python3
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get install -y -qq --no-install-recommends python3-venv > /dev/null 2>&1 || warn "cannot install python3-venv"
fi
echo "install_hf_python: installing ${pins[*]} into $venv (about 3 GB from PyPI)" >&2
start=$(date +%s)
rm -rf "$venv"
python3 -m venv "$venv" || warn "cannot create $venv"
"$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir "${pins[@]}" > "$venv/install.log" 2>&1 ||
  warn "pip install failed: $(tail -n 1 "$venv/install.log")"
"$py" -c "$check" > /dev/null 2>&1 || warn "$venv does not import the pinned versions"
echo "install_hf_python: done in $(( $(date +%s) - start )) s" >&2
