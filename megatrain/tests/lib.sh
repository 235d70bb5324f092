# lib.sh: helpers for the shell tests (sourced). Each check counts; `finish`
# prints "N passed, M failed" and exits non-zero on any failure.
set -u
MT="${MT_BIN:-build/bin}/megatrain"
FIX=megatrain/tests/fixtures
DATA=megatrain/tests/data
passed=0
failed=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [ ! -x "$MT" ]; then
  echo "missing $MT (build first: make)" >&2
  exit 1
fi

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
check() { # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then ok; else bad "$what"; fi
}
finish() {
  echo "$(basename "$0" .sh): $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}

# expect RC NEEDLE ARGS...: megatrain ARGS exits RC and its last stderr line holds NEEDLE.
expect() {
  local rc=$1 needle=$2; shift 2
  "$MT" "$@" > "$TMP/out" 2> "$TMP/err"
  local got=$? last; last=$(tail -n 1 "$TMP/err")
  if [ $got -ne "$rc" ]; then bad "megatrain $*: exit $got (want $rc): $last"; return; fi
  if ! grep -qF -- "$needle" <<< "$last"; then bad "megatrain $*: last stderr line lacks '$needle': $last"; return; fi
  ok
}
# resign DIR FILE: records FILE's new size and CRC-32 in DIR/checkpoint.json (each
# tensor's, for a tensor file), as a careful forger would, so what a test meets is the
# check behind the checksum.
resign() {
  python3 - "$1" "$2" <<'EOF'
import json, sys, zlib
d, name = sys.argv[1], sys.argv[2]
m = json.load(open(f"{d}/checkpoint.json"))
b = open(f"{d}/{name}", "rb").read()
m["files"][name]["bytes"] = len(b)
if "crc32" in m["files"][name]:
    m["files"][name]["crc32"] = "%08x" % zlib.crc32(b)
else:  # a tensor file: re-sign every tensor
    n = int.from_bytes(b[:8], "little"); h = json.loads(b[8:8 + n])
    for k, t in h.items():
        if k != "__metadata__":
            a, e = t["data_offsets"]
            m["files"][name]["tensors"][k]["crc32"] = "%08x" % zlib.crc32(b[8 + n + a:8 + n + e])
json.dump(m, open(f"{d}/checkpoint.json", "w"), indent=1)
EOF
}
# same_state A B: checkpoints A and B hold bitwise the same parameters and optimizer state.
# Either may be in any layout (one file, HF shards, several hosts' slices): compared tensor by tensor.
same_state() {
  if [ -f "$1/model.safetensors" ] && [ -f "$2/model.safetensors" ] && [ -f "$1/optimizer.safetensors" ] &&
     [ -f "$2/optimizer.safetensors" ]; then
    cmp -s "$1/model.safetensors" "$2/model.safetensors" && cmp -s "$1/optimizer.safetensors" "$2/optimizer.safetensors"
  else
    python3 - "$1" "$2" <<'PY'
import glob, json, os, sys
def load(d):  # every tensor's bytes, a several-hosts save's slices joined in element order
    out, parts = {}, {}
    for p in sorted(glob.glob(os.path.join(d, "model*.safetensors")) + glob.glob(os.path.join(d, "optimizer*.safetensors"))):
        b = open(p, "rb").read(); n = int.from_bytes(b[:8], "little"); h = json.loads(b[8:8 + n])
        for k, t in h.items():
            if k != "__metadata__": s, e = t["data_offsets"]; out[k] = (t["dtype"], b[8 + n + s:8 + n + e])
    ix = os.path.join(d, "optimizer.safetensors.index.json")
    sl = json.load(open(ix)).get("slices", {}) if os.path.exists(ix) else {}
    for k, r in sorted(sl.items(), key=lambda kv: kv[1]["start"]):
        dt, raw = out.pop(k); parts.setdefault(r["tensor"], [dt, b""])[1] += raw
    out.update({k: tuple(v) for k, v in parts.items()})
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
sys.exit(0 if a == b and a else 1)
PY
  fi
}
# close_params A B TOL [differ]: the parameters' relative L2 difference ||a - b|| / ||b|| is at
# most TOL; with `differ`, also not zero (a different summation order must show).
close_params() {
  python3 - "$1/model.safetensors" "$2/model.safetensors" "$3" "${4:-}" <<'PY'
import json, math, struct, sys
def load(p):
    b = open(p, "rb").read(); n = int.from_bytes(b[:8], "little"); h = json.loads(b[8:8 + n]); out = {}
    for k, t in h.items():
        if k == "__metadata__": continue
        s, e = t["data_offsets"]; raw = b[8 + n + s:8 + n + e]
        if t["dtype"] == "F32": out[k] = struct.unpack("<%df" % (len(raw) // 4), raw)
        else: out[k] = [struct.unpack("<f", struct.pack("<I", x << 16))[0] for x in struct.unpack("<%dH" % (len(raw) // 2), raw)]
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
d2 = sum((x - y) ** 2 for k in b for x, y in zip(a[k], b[k])); n2 = sum(y * y for k in b for y in b[k])
rel = math.sqrt(d2 / n2)
print("relative L2 difference %.3g (tolerance %s)" % (rel, sys.argv[3]), file=sys.stderr)
sys.exit(0 if rel <= float(sys.argv[3]) and (d2 > 0 or sys.argv[4] != "differ") else 1)
PY
}

# need_mpi NAME: skips the test (exit 77) where mpirun is missing or megatrain was built without
# MPI; else lets mpirun run as root and oversubscribe this machine's cores.
need_mpi() {
  if ! command -v mpirun > /dev/null; then
    echo "$1: skipped: mpirun not found (Debian: openmpi-bin libopenmpi-dev, as ci/install_deps.sh installs)"
    exit 77
  fi
  if [ "$("$MT" --version | jq .mpi)" != true ]; then
    echo "$1: skipped: $MT was built without MPI (install libopenmpi-dev and rebuild)"
    exit 77
  fi
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
}
# The two runs the MPI tests compare, each with the test's `common` arguments and --save OUTDIR
# (OUTDIR.jsonl the records, OUTDIR.err shown on failure):
# run OUTDIR ARGS... (one process); mrun NP OUTDIR ARGS... (NP hosts).
run() {
  local out=$1; shift
  "$MT" train "${common[@]}" "$@" --save "$out" > "$out.jsonl" 2> "$out.err" || { cat "$out.err" >&2; return 1; }
}
mrun() {
  local np=$1 out=$2; shift 2
  mpirun -np "$np" "$MT" train "${common[@]}" "$@" --save "$out" > "$out.jsonl" 2> "$out.err" || { cat "$out.err" >&2; return 1; }
}
