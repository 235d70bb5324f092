#!/usr/bin/env bash
# harness/sweep/peer_check.py: the sim's models of the real peers against their measured GPU
# rows (issue 26: within 15%). Checks the check, not the hardware: on the committed rows its
# exit status agrees with the errors it prints and the rows' noise; a row 30% slower than its
# model fails, naming it; no peer row at all, or a GPU no profile knows, is an error, not a
# pass. Deterministic (the sim runs in virtual time).
. "$(dirname "$0")/lib.sh" python3 bins

python3 -m harness.sweep.peer_check > "$tmp/out" 2> "$tmp/err"
rc=$?
python3 - "$tmp/out" "$rc" > "$tmp/py" 2>&1 <<'PY' && pass "committed rows: the verdict agrees with the errors ($(cat "$tmp/py"))" || fail "committed rows: $(cat "$tmp/py")"
import re, sys
lines = [l for l in open(sys.argv[1]) if "] " not in l and re.search(r"\[(ok|OUTSIDE)\]$", l.strip())]
errs = [(float(m.group(1)), float(m.group(2))) for l in lines
        for m in [re.search(r"([-+][0-9.]+)% \(noise ±([0-9.]+)%\)", l)] if m]
assert errs, "no row compared"
outside = [e for e, n in errs if abs(e) > 15 + n]
assert int(sys.argv[2]) == (1 if outside else 0), (sys.argv[2], errs)
print(f"{len(errs)} rows, worst {max(abs(e) for e, _ in errs):.1f}%")
PY

# The DeepSpeed rows made 30% slower than measured (their model unchanged): outside, named.
mkdir -p "$tmp/slow" "$tmp/none" "$tmp/gpu"
python3 - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
rows = [json.loads(l) for l in open("results/gpu_c2_deepspeed.jsonl")]
def write(d, rs):
    with open(f"{t}/{d}/gpu_c2_deepspeed.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rs)
slow = []
for r in rows:
    r = json.loads(json.dumps(r))
    if r["system"] == "deepspeed_zero3" and "step_ms" in r:
        for k in ("median", "min", "max"):
            r["step_ms"][k] *= 1.3
    slow.append(r)
write("slow", slow)
write("none", [r for r in rows if r["system"] == "megatrain"])
gpu = json.loads(json.dumps(rows))
for r in gpu:
    r.setdefault("env", {})["gpu_name"] = "NVIDIA Z9000"
write("gpu", gpu)
PY
python3 -m harness.sweep.peer_check --results "$tmp/slow" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc = 1 ] && grep -q "outside ±15%.*deepspeed_zero3 b16" "$tmp/err" &&
  pass "a row 30% slower than its model: exit 1, named ($(tail -c 120 "$tmp/err"))" || fail "slow rows: exit $rc: $(cat "$tmp/err")"
exits 1 "no measured peer row: an error" python3 -m harness.sweep.peer_check --results "$tmp/none"
python3 -m harness.sweep.peer_check --results "$tmp/gpu" > /dev/null 2> "$tmp/err"
[ $? = 1 ] && grep -q "no profile matches GPU 'NVIDIA Z9000'" "$tmp/err" &&
  pass "a GPU no profile knows: exit 1, said" || fail "unknown GPU: $(cat "$tmp/err")"
finish
