# cuda_libs.sh: sourced by ci/gpu_campaign.sh on the GPU machine (and by its test here).
# mt_find_cuda_libs BIN PYTHON puts CUDA's own libraries (cudart, cuBLAS/cuBLASLt, cuDNN
# and the nvrtc it compiles with) on LD_LIBRARY_PATH after what is there: the toolkit's
# ($MT_CUDA_HOME, default /usr/local/cuda), else the nvidia wheels PyTorch brings
# (site-packages/nvidia/*/lib: cu13/lib for cudart and cuBLAS, cudnn/lib for cuDNN).
# cuDNN is dlopen'ed (megatrain/backends/cuda/cudnn_api.h), so ldd cannot report it
# missing: it is looked for on the path and in the loader's cache ($MT_LDCONFIG, default
# `ldconfig -p`, replaceable for the test). One line on stderr says what was found.

mt_cudnn_found() {
  local d
  for d in ${LD_LIBRARY_PATH//:/ }; do [ -e "$d/libcudnn.so.9" ] && return 0; done
  ${MT_LDCONFIG:-ldconfig -p} 2> /dev/null | grep -q 'libcudnn\.so\.9 '
}

# The lib folders of every nvidia wheel importable by PYTHON (a namespace package: each
# entry of nvidia.__path__ is one site-packages' nvidia/), ':'-joined; empty if none.
mt_wheel_lib_dirs() {
  "$1" - 2> /dev/null <<'EOF'
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
dirs = sorted({os.path.dirname(p) for base in nvidia.__path__
               for p in glob.glob(os.path.join(base, "*", "lib", "*.so*"))})
print(":".join(dirs))
EOF
}

mt_find_cuda_libs() {
  local bin=$1 py=$2 home=${MT_CUDA_HOME:-/usr/local/cuda} d toolkit="" wheels="" how
  for d in "$home/lib64" "$home/lib" "$home/targets/x86_64-linux/lib"; do
    [ -d "$d" ] && toolkit="$toolkit${toolkit:+:}$d"
  done
  [ -n "$toolkit" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$toolkit"
  if ldd "$bin" 2> /dev/null | grep -q "not found" || ! mt_cudnn_found; then
    wheels=$(mt_wheel_lib_dirs "$py")
    [ -n "$wheels" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$wheels"
  fi
  how="toolkit ${toolkit:-none}; wheels ${wheels:-not needed or none}"
  echo "gpu_campaign: CUDA libraries: $how" >&2
  local missing
  missing=$(ldd "$bin" 2> /dev/null | grep "not found" | tr -s ' \t' ' ')
  [ -z "$missing" ] || echo "gpu_campaign: WARNING: $(basename "$bin") lacks:$missing" >&2
  mt_cudnn_found || echo "gpu_campaign: WARNING: libcudnn.so.9 not found: attention runs on the native kernels" >&2
  ldd "$bin" 2> /dev/null | grep -E 'libcudart|libcublas' | tr -s ' \t' ' ' | sed 's/ (0x[0-9a-f]*)//; s/^/gpu_campaign: /' >&2
  return 0
}
