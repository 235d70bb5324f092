#!/usr/bin/env bash
# harness/sweep/claims.py on made-up rows of a made-up sweep: every verdict can fail.
# A ratio claim measured on a GPU gives reproduced / not reproduced / inconclusive
# (within noise) by the rows' own min..max; the same with an extrapolated row says
# "extrapolated (+/-E%)" and never "reproduced"; a projection says pending GPU, or "by
# construction" where its claim row says so; a CPU row is a CPU check; at_least and
# not_slower allow for noise too. Rows from a dirty tree and rows of entries no longer
# in the sweep are left out (no data) unless --allow-dirty. Needs python3 only.
. "$(dirname "$0")/lib.sh" python3
mkdir -p "$tmp/sweeps"
cat > "$tmp/sweeps/t_c2.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_c2", "paths": ["gpu"],
 "defaults": {"model": "experiments/models/qwen2.5-14b.json", "model_name": "m", "backend": "cuda",
              "mode": "measured", "seq_len": 1024},
 "matrix": {"schedule": ["megatrain", "zero3"], "batch": [4]},
 "claims": [{"id": "T1", "claim": "ratio claim", "paper": "1.5x", "test": "ratio", "at_least": 1.5,
             "numerator": {"system": "megatrain"}, "denominator": {"system": "zero3"}},
            {"id": "T5", "claim": "h2d claim", "test": "at_least", "field": "h2d_gbps", "at_least": 0.9, "optional": true,
             "of_profile": "link.h2d_gbps.pinned", "no_verdict": "not measured", "where": {"system": "megatrain"},
             "ours": "{h2d_gbps:.1f} of {profile_value:.1f} GB/s ({profile})"},
            {"id": "T6", "claim": "seq claim", "test": "at_least", "field": "seq_len", "at_least": 1024,
             "pick": "max", "optional": true},
            {"id": "T7", "claim": "longer seq claim", "test": "at_least", "field": "seq_len", "at_least": 2048,
             "pick": "max", "optional": true}]}
EOF
cat > "$tmp/sweeps/t_abl.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_abl", "paths": ["gpu"],
 "defaults": {"model": "experiments/models/qwen2.5-14b.json", "model_name": "m", "backend": "cuda",
              "mode": "measured", "batch": 16, "seq_len": 1024},
 "configs": [{"variant": "baseline"}, {"variant": "bind=copy", "args": ["--bind", "copy"]}],
 "claims": [{"id": "T2", "claim": "busy claim", "test": "at_least", "field": "gpu_busy_frac", "at_least": 0.8,
             "where": {"variant": "baseline"}},
            {"id": "T3", "claim": "bind claim", "test": "not_slower", "a": {"variant": "baseline"},
             "b": {"variant": "bind=copy"}, "by_construction": "the model charges the copy"}]}
EOF
cat > "$tmp/sweeps/t_pred.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_pred",
 "defaults": {"model": "experiments/models/qwen2.5-14b.json", "model_name": "m", "mode": "projected",
              "hardware": "h100-128g", "seq_len": 1024},
 "matrix": {"schedule": ["megatrain", "zero3"], "batch": [4]},
 "claims": [{"id": "T4", "claim": "sim claim", "test": "predicted", "against": ["t_c2"], "within": 0.1,
             "optional": true, "words": {"agrees": "sim inside", "disagrees": "sim outside", "within": "sim borderline"}}]}
EOF
cat > "$tmp/sweeps/t_val.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_val",
 "defaults": {"model": "experiments/models/qwen2.5-14b.json", "model_name": "m", "mode": "projected",
              "hardware": "h100-128g", "seq_len": 1024, "batch": 4, "schedule": "megatrain"},
 "claims": [{"id": "T8", "claim": "validation claim", "test": "validation", "against": ["t_c2"], "within": 0.1,
             "optional": true, "words": {"agrees": "val inside", "disagrees": "val outside", "within": "val borderline"}}]}
EOF

# mk DIR SPEC: writes DIR/t_c2.jsonl and DIR/t_abl.jsonl from a JSON spec of overrides
# ("layers": [run, model] cuts every row's depth; "error": SCHEDULE fails that row):
# {"c2": {"megatrain": [tps, noise, mode], "zero3": [...]}, "busy": [v, lo, hi],
#  "bind": [pointer_ms, copy_ms, noise], "backend": "cuda", "dirty": false, "stale": false}
mk() {
  python3 - "$tmp/sweeps" "$1" "$2" <<'EOF'
import json, os, sys
from harness.sweep import common, sweeps
sdir, out, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sweeps.set_dir(sdir)
os.makedirs(out, exist_ok=True)
env = {k: None for k in common.ENV_KEYS}
env.update(git_sha="0123456789ab", git_dirty=spec.get("dirty", False), gpu_name="NVIDIA H100 80GB HBM3")
def row(exp, c, ms, noise, mode, **extra):
    r = {k: None for k in common.RESULT_KEYS}
    proj = mode == "projected"
    r.update(schema=common.RESULTS_SCHEMA, experiment=exp, system=c["schedule"], mode=mode, model="m",
             params=14e9, batch=c["batch"], seq_len=1024, precision="paper", env=dict(env),
             backend="sim" if proj else spec.get("backend", "cuda"), hardware="gh200-480g" if proj else None,
             variant=c["variant"], config_key=sweeps.config_key(c) if not spec.get("stale") else "stale0000",
             sweep={"file": exp + ".json", "hardware_override": None}, tokens=c["batch"] * 1024, fits=True,
             step_ms={"median": ms, "min": ms * (1 - noise), "max": ms * (1 + noise), "n": 5})
    if mode == "extrapolated":
        r["step_ms"]["err_frac"] = noise
        r["fit"] = {"depths": [4, 8], "holdout": {"depth": 12}}
    r["tokens_per_s"] = r["tokens"] / (ms / 1e3)
    r["tflops"] = 6 * 14e9 * r["tokens_per_s"] / 1e12
    r.update(extra)
    if spec.get("layers"):  # a depth-cut run: layers_run of layers_model
        r["layers_run"], r["layers_model"] = spec["layers"]
    if spec.get("error") == c["schedule"]:  # a configuration that failed: an error, no figures
        r["error"] = "exit 1: the run failed"
        r["step_ms"] = r["tokens_per_s"] = r["tflops"] = None
    return r
by = {s["experiment"]: s for s in sweeps.all_sweeps()}
rows = []
for c in sweeps.expand(by["t_c2"]):
    tps, noise, mode = spec["c2"][c["schedule"]]
    rows.append(row("t_c2", c, c["batch"] * 1024 / tps * 1e3, noise, mode))
common.write_jsonl(os.path.join(out, "t_c2.jsonl"), rows)
rows = []
for c in sweeps.expand(by["t_abl"]):
    p, q, noise = spec.get("bind", [100, 110, 0.01])
    v, lo, hi = spec.get("busy", [0.9, 0.89, 0.91])
    rows.append(row("t_abl", c, p if c["variant"] == "baseline" else q, noise, spec.get("abl_mode", "measured"),
                    gpu_busy_frac=v, gpu_busy_range=[lo, hi]))
common.write_jsonl(os.path.join(out, "t_abl.jsonl"), rows)
EOF
}
# verdict NAME CLAIM WANT-REGEX DIR [claims.py options]: the verdict of that claim row matches
verdict() {
  local name=$1 claim=$2 want=$3 dir=$4; shift 4
  local got
  got=$(python3 -m harness.sweep.claims --sweeps "$tmp/sweeps" --results "$dir" "$@" 2> "$dir.err" |
        grep "^$claim " | sed 's/  */ /g; s/ *$//')
  if printf '%s' "$got" | grep -Eq -- "$want"; then echo "ok   $name"; else
    fail "$name: want /$want/ in: $got"; cat "$dir.err"; fi
}
M=measured E=extrapolated
mk "$tmp/agree"    '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}}'
verdict "measured on a GPU, clearly past the threshold" "ratio claim" 'reproduced \(noise ±2\.0%\)$' "$tmp/agree"
mk "$tmp/disagree" '{"c2": {"megatrain": [1200, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}}'
verdict "measured, clearly short" "ratio claim" 'not reproduced \(noise ±2\.0%\)$' "$tmp/disagree"
mk "$tmp/noisy"    '{"c2": {"megatrain": [1550, 0.05, "measured"], "zero3": [1000, 0.05, "measured"]}}'
verdict "measured, inside the noise allowance" "ratio claim" 'inconclusive \(within noise\) \(noise ±10\.0%\)$' "$tmp/noisy"
mk "$tmp/extra"    '{"c2": {"megatrain": [2000, 0.2, "extrapolated"], "zero3": [1000, 0.01, "measured"]}}'
verdict "an extrapolated row: extrapolated (±E%), agrees" "ratio claim" 'extrapolated \(±21%\): agrees$' "$tmp/extra"
mk "$tmp/extra2"   '{"c2": {"megatrain": [1700, 0.2, "extrapolated"], "zero3": [1000, 0.01, "measured"]}}'
verdict "an extrapolated row inside its error: within error, never reproduced" "ratio claim" \
  'extrapolated \(±21%\): within error$' "$tmp/extra2"
mk "$tmp/cpu"      '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "backend": "cpu"}'
verdict "measured on the CPU: a CPU check, not the claim" "ratio claim" '^ratio claim .*CPU check \(not the claim\): agrees' "$tmp/cpu"

# at_least allows for the spread of gpu_busy_frac over the timed steps
mk "$tmp/busy1" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "busy": [0.85, 0.84, 0.86]}'
verdict "at_least, clearly above" "busy claim" 'reproduced \(noise ±1\.2%\)$' "$tmp/busy1"
mk "$tmp/busy2" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "busy": [0.82, 0.7, 0.9]}'
verdict "at_least, inside its spread" "busy claim" 'inconclusive' "$tmp/busy2"
mk "$tmp/busy3" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "busy": [0.6, 0.59, 0.61]}'
verdict "at_least, clearly below" "busy claim" 'not reproduced' "$tmp/busy3"
# not_slower: measured on a GPU it can fail; projected, its claim row says by construction
mk "$tmp/bind1" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "bind": [120, 100, 0.01]}'
verdict "not_slower, pointer bind slower beyond noise" "bind claim" 'not reproduced \(noise ±2\.0%\)$' "$tmp/bind1"
mk "$tmp/bind2" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "bind": [100, 120, 0.01]}'
verdict "not_slower, clearly faster" "bind claim" 'reproduced' "$tmp/bind2"
mk "$tmp/bind3" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "bind": [120, 100, 0.0], "abl_mode": "projected"}'
verdict "a projection true by construction says so" "bind claim" 'by construction \(the model charges the copy\)$' "$tmp/bind3"
verdict "a projection otherwise is pending GPU" "busy claim" 'pending GPU \(projection agrees; noise ±1\.1%\)$' "$tmp/bind3"

# predicted: each projection against the measured row of its configuration (same GPU), per
# configuration; one pair outside the tolerance is enough to disagree
mkpred() {  # mkpred DIR ERR_MEGATRAIN ERR_ZERO3 [HARDWARE]: t_pred rows off the measured t_c2 rows
  python3 - "$tmp/sweeps" "$@" <<'EOF'
import json, os, sys
from harness.sweep import common, sweeps
sdir, out, e1, e2 = sys.argv[1:5]
hw = sys.argv[5] if len(sys.argv) > 5 else "h100-128g"
sweeps.set_dir(sdir)
meas = {r["system"]: r for r in common.load_jsonl(os.path.join(out, "t_c2.jsonl"))}
rows = []
for c in sweeps.expand(sweeps.by_experiment()["t_pred"]):
    m = meas[c["schedule"]]
    ms = m["step_ms"]["median"] * (1 + float(e1 if c["schedule"] == "megatrain" else e2))
    r = dict(m, mode="projected", backend="sim", hardware=hw, config_key=sweeps.config_key(c), experiment="t_pred",
             step_ms={"median": ms, "min": ms, "max": ms, "n": 5}, tokens_per_s=m["tokens"] / (ms / 1e3))
    rows.append(r)
common.write_jsonl(os.path.join(out, "t_pred.jsonl"), rows)
EOF
}
for d in pred1 pred2 pred3 pred4; do
  mk "$tmp/$d" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}}'
done
mkpred "$tmp/pred1" 0.05 -0.04
verdict "predicted: every pair inside the tolerance" "sim claim" 'megatrain b4 T1024 \+5%, m zero3 b4 T1024 -4% .*sim inside' "$tmp/pred1"
mkpred "$tmp/pred2" 0.05 -0.3
verdict "predicted: one pair outside is enough" "sim claim" 'zero3 b4 T1024 -30% .*sim outside' "$tmp/pred2"
mkpred "$tmp/pred3" 0.095 0.0
verdict "predicted: at the edge, within the measured noise" "sim claim" 'sim borderline' "$tmp/pred3"
mkpred "$tmp/pred4" 0.0 0.0 h200-128g
got=$(python3 -m harness.sweep.claims --sweeps "$tmp/sweeps" --results "$tmp/pred4" 2>/dev/null | grep -c "^sim claim")
[ "$got" = 0 ] && echo "ok   predicted: a projection on another GPU's profile pairs with nothing" ||
  fail "an H200 projection paired with H100 rows"

# validation: results/sim_validation.json (sim_check.py) per configuration; only the rows that
# validate the current engine count, the others are listed apart and cannot fail the claim
mkval() {  # mkval DIR ERR_MEGATRAIN VALIDATES ERR_ZERO3 VALIDATES: sim_validation.json off the t_c2 rows
  python3 - "$@" <<'EOF'
import json, os, sys
from harness.sweep import common
from harness.sweep.sim_check import label
out, e1, v1, e2, v2 = sys.argv[1:6]
meas = {r["system"]: r for r in common.load_jsonl(os.path.join(out, "t_c2.jsonl"))}
cfg = []
for sysname, e, v in (("megatrain", float(e1), v1 == "1"), ("zero3", float(e2), v2 == "1")):
    m = meas[sysname]["step_ms"]["median"]
    cfg.append({"key": label(meas[sysname]), "measured_ms": m, "sim_ms": m * (1 + e), "err": e,
                "validates_current_engine": v, "why": "test"})
good = sorted(abs(c["err"]) for c in cfg if c["validates_current_engine"])
v = {"schema": "megatrain.sim_validation/1", "growth": "test",
     "profiles": {"h100-128g": {"gpu": "NVIDIA H100", "n": len(good), "worst_abs_err": good[-1] if good else None,
                                "median_abs_err": good[len(good) // 2] if good else None, "within": 0.1, "configs": cfg}}}
json.dump(v, open(os.path.join(out, "sim_validation.json"), "w"))
EOF
}
for d in val1 val2 val3; do
  mk "$tmp/$d" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}}'
done
mkval "$tmp/val1" 0.05 1 -0.4 0
verdict "validation: a row on an older engine is listed apart and does not fail the claim" "validation claim" \
  'the 1 configurations measured on the current engine: m megatrain b4 T1024 [^ ]* \+5% .*not counted, 1 .*-40% .*val inside' "$tmp/val1"
mkval "$tmp/val2" 0.05 1 -0.3 1
verdict "validation: one validating row outside is enough" "validation claim" 'val outside' "$tmp/val2"
# the band a projection carries: unvalidated off the validated profile, at least the worst measured error
mk "$tmp/val4" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "bind": [120, 100, 0.0], "abl_mode": "projected"}'
mkval "$tmp/val4" 0.07 1 -0.4 0
verdict "a projection off the validated profile carries 'at least' the worst validated error" "busy claim" \
  'projected \(sim, gh200-480g; unvalidated here: at least ±7%, the worst measured on the NVIDIA H100\)' "$tmp/val4"
verdict "no sim_validation.json: a projection carries no band" "busy claim" 'projected \(sim, gh200-480g\) ' "$tmp/bind3"
python3 - "$tmp/val4" <<'EOF' > "$tmp/region.txt" 2>&1 &&
import sys
from harness.sweep import claims
ctx = {"results_dir": sys.argv[1]}  # mkval: m megatrain b4 T1024 validates on h100-128g
row = lambda **k: dict(dict(model="m", batch=4, seq_len=1024, mode="projected", backend="sim", hardware="h100-128g"), **k)
assert claims.band(row(), ctx).startswith("±7%, worst of 1 measured"), claims.band(row(), ctx)
assert claims.band(row(batch=8), ctx).startswith("unvalidated here"), claims.band(row(batch=8), ctx)
assert claims.band(row(model="other"), ctx).startswith("unvalidated here")
assert claims.band(row(backend="plan"), ctx).startswith("closed form")
EOF
  echo "ok   band: the worst validated error inside the measured region, 'at least' outside it" ||
  fail "band region: $(cat "$tmp/region.txt")"
got=$(python3 -m harness.sweep.claims --sweeps "$tmp/sweeps" --results "$tmp/val3" 2>/dev/null | grep -c "^validation claim")
[ "$got" = 0 ] && echo "ok   validation: no sim_validation.json, no row (optional)" ||
  fail "a validation claim without results/sim_validation.json gave a row"

# at_least of a profile figure: against the pinned rate of the row's GPU, a verdict only
# where the profile says it was measured (the committed profiles are datasheet figures)
mkh2d() {  # mkh2d DIR H2D_GBPS: the t_c2 rows of DIR get an h2d_gbps
  python3 - "$1" "$2" <<'EOF'
import os, sys
from harness.sweep import common
d, v = sys.argv[1], float(sys.argv[2])
rows = common.load_jsonl(os.path.join(d, "t_c2.jsonl"))
for r in rows:
    r["h2d_gbps"] = v
common.write_jsonl(os.path.join(d, "t_c2.jsonl"), rows)
EOF
}
mkdir -p "$tmp/hw"
python3 -c "
import json, sys
p = json.load(open('experiments/hardware/h100-128g.json'))
p['link']['h2d_gbps']['pinned'] = 50.0
p['sources']['link.h2d_gbps.pinned'] = 'measured: mt-microbench copy/cuda/pinned/h2d/1073741824 (test)'
json.dump(p, open('$tmp/hw/h100-128g.json', 'w'))"
for d in h2d1 h2d2 h2d3; do cp -r "$tmp/pred1" "$tmp/$d"; done
mkh2d "$tmp/h2d1" 47; mkh2d "$tmp/h2d2" 40; mkh2d "$tmp/h2d3" 47
MT_HARDWARE_DIR=$tmp/hw verdict "of_profile: 94% of a measured pinned rate agrees" "h2d claim" \
  '47\.0 of 50\.0 GB/s \(h100-128g\) .*reproduced' "$tmp/h2d1"
MT_HARDWARE_DIR=$tmp/hw verdict "of_profile: 80% of it does not" "h2d claim" 'not reproduced' "$tmp/h2d2"
verdict "of_profile: a datasheet rate gives no verdict" "h2d claim" \
  'h100-128g: datasheet, not measured\) .*no verdict \(not measured\)' "$tmp/h2d3"

# rows from a dirty tree, and rows of entries no longer in the sweep, are left out
mk "$tmp/dirty" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "dirty": true}'
verdict "rows from a dirty tree are left out" "ratio claim" 'no data$' "$tmp/dirty"
grep -q "dirty or unknown tree: t_abl (dirty tree) 2, t_c2 (dirty tree) 2" "$tmp/dirty.err" && echo "ok   ... and said so" ||
  { fail "no word of the dirty rows"; cat "$tmp/dirty.err"; }
verdict "--allow-dirty takes them" "ratio claim" 'reproduced' "$tmp/dirty" --allow-dirty
mk "$tmp/stale" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "stale": true}'
verdict "rows of removed sweep entries are left out, even with --allow-dirty" "ratio claim" 'no data$' "$tmp/stale" --allow-dirty
grep -q "no longer exist: t_abl 2, t_c2 2" "$tmp/stale.err" && echo "ok   ... and said so" || fail "no word of the stale rows"

# the depth-extrapolation check: a row's own full-depth measurement from the same interleaved
# rounds (fit.check) is what it is held to, before any row of the `against` experiment
python3 - > "$tmp/ex.txt" 2>&1 <<'EOF'
import sys
from harness.sweep import claims
env = {"git_sha": "0123456789ab", "git_dirty": False}
def ex(pred, E, check=None):
    r = {"mode": "extrapolated", "system": "megatrain", "batch": 4, "layers_model": 8, "env": env, "tokens_per_s": 1.0,
         "step_ms": {"median": pred, "min": pred * (1 - E), "max": pred * (1 + E), "err_frac": E},
         "fit": {"depths": [2, 4], "holdout": {"depth": 6}}}
    if check:
        r["fit"]["check"] = {"depth": 8, "measured_ms": check, "measured_min_ms": check, "measured_max_ms": check}
    return r
far = {"mode": "measured", "system": "megatrain", "batch": 4, "env": env, "tokens_per_s": 1.0,
       "step_ms": {"median": 500.0, "min": 500.0, "max": 500.0}}
spec = {"against": "other", "match": ["system", "batch"]}
ctx = {"all": {"other": [far]}}
for name, rows in (("check inside", [ex(1000, 0.1, 950)]), ("check outside", [ex(1000, 0.1, 700)]),
                   ("no check: the other experiment", [ex(1000, 0.1)])):
    text, used, outcome, _ = claims.t_extrapolation(spec, rows, ctx)
    print(name, outcome, text)
EOF
grep -q "^check inside agrees .*same interleaved rounds.*megatrain +5% (bar ±10%)" "$tmp/ex.txt" &&
grep -q "^check outside disagrees .*megatrain +43%" "$tmp/ex.txt" &&
grep -q "^no check: the other experiment disagrees .*measured in other.*megatrain +100%" "$tmp/ex.txt" &&
  echo "ok   extrapolation held to its own full-depth check first, else to the other experiment" ||
  { fail "extrapolation check"; cat "$tmp/ex.txt"; }

# published: a published figure beside our model of that system, the model's error said, no verdict
python3 - > "$tmp/pub.txt" 2>&1 <<'EOF'
import sys
from harness.sweep import claims
def row(system, tflops):
    return {"system": system, "backend": "sim", "mode": "projected", "hardware": "h100-128g", "tflops": tflops,
            "tokens_per_s": 1.0, "step_ms": {"median": 10.0, "min": 10.0, "max": 10.0}}
spec = {"id": "P", "claim": "published check", "paper": "272 TFLOPS", "test": "published", "published": 272,
        "model": {"system": "official"}, "beside": {"system": "megatrain"}, "no_verdict": "a check",
        "ours": "{model_value:.0f} ({err_pct:+.0f}%), ours {beside_value:.0f} ({beside_ratio:.2f}x)"}
claims.check_spec(spec, "t")
print(claims.claim_row(spec, [row("official", 299.2), row("megatrain", 448.8)], {}))
print(claims.claim_row(spec, [row("megatrain", 448.8)], {}))
EOF
grep -q "299 (+10%), ours 449 (1.50x)" "$tmp/pub.txt" && grep -q "no verdict (a check)" "$tmp/pub.txt" &&
  grep -q "no rows" "$tmp/pub.txt" && echo "ok   published: the model's error beside the figure, no verdict" ||
  { fail "published claim"; cat "$tmp/pub.txt"; }

# the committed sweep files declare valid claim rows (check_spec runs on every one)
python3 -m harness.sweep.claims --results "$tmp/empty" > "$tmp/real.txt" 2> "$tmp/real.err" &&
  grep -q "^C2 14B vs DeepSpeed ZeRO-3 offload .* no data" "$tmp/real.txt" && echo "ok   the committed claim rows parse" ||
  { fail "committed claim rows"; cat "$tmp/real.err"; }

# A figure of the configuration (seq_len) is exact: no timing noise makes a met threshold
# "inconclusive", and one above every row is not reproduced (issue 23: the long-context claim).
verdict "an exact field that meets its threshold" "seq claim" 'reproduced \(noise ±0\.0%\)$' "$tmp/agree"
verdict "an exact field below its threshold" "longer seq claim" 'not reproduced \(noise ±0\.0%\)$' "$tmp/agree"
# A depth-cut run's verdict says so (issue 23: it is not a full-depth reproduction).
mk "$tmp/cut" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "layers": [8, 48]}'
verdict "a depth-cut run: reproduced at reduced depth" "ratio claim" \
  'reproduced at reduced depth \(8 of 48 layers\) \(noise ±2\.0%\)$' "$tmp/cut"
# A configuration that failed shows where its figure would be, with its error (issue 23), not "no data".
mk "$tmp/failed" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}, "error": "zero3"}'
verdict "a failed denominator: the claim says failed, with the error" "ratio claim" \
  'no figure: zero3 b4 paper failed: exit 1: the run failed .*failed \(1 row\(s\) with an error in results/t_c2\.jsonl\)$' \
  "$tmp/failed"
# A ratio is taken against the denominator's fastest configuration (a peer's tuned grid), at the
# numerator's batch too (not its first row there); a phases row (timing "phases": synchronizes
# between the phases) is never taken, however fast it reads.
if python3 - <<'PY'
import sys
from harness.sweep import claims
def r(system, batch, tps, **kw):
    return dict({"system": system, "batch": batch, "tokens_per_s": tps, "mode": "measured", "backend": "cuda",
                 "step_ms": {"median": 1.0, "min": 1.0, "max": 1.0}}, **kw)
rows = [r("megatrain", 16, 300.0), r("ds", 16, 100.0, variant="defaults"), r("ds", 16, 150.0, variant="tuned"),
        r("ds", 16, 250.0, variant="tuned", timing="phases"), r("ds", 64, 200.0)]
spec = {"numerator": {"system": "megatrain"}, "denominator": {"system": "ds"}, "at_least": 1.5,
        "ours": "{ratio:.2f}x{same_batch}"}
text = claims.t_ratio(spec, rows, {})[0]
sys.exit(0 if text == "1.50x; at batch 16: 2.00x" else print(text) or 1)
PY
then pass "ratio: against the fastest configuration, at the batch too; a phases row never taken"
else fail "ratio against the fastest configuration"; fi


# Where each row's figures come from (issue 38): rows of --run DIR say "this run" and replace
# results/' rows of the same configuration; filed rows name their machine, date and commit, or
# the campaign part whose manifest brackets them; the table ends with a tally.
mk "$tmp/run" '{"c2": {"megatrain": [2000, 0.01, "measured"], "zero3": [1000, 0.01, "measured"]}}'
rm "$tmp/run/t_abl.jsonl"
out=$(python3 -m harness.sweep.claims --sweeps "$tmp/sweeps" --results "$tmp/disagree" 2> /dev/null)
grep -q -- '^ratio claim .*filed from NVIDIA H100 80GB HBM3, undated, 0123456789ab  *not reproduced' <<< "$out" &&
  grep -q -- '^tally: reproduced here 0, reproduced on a filed GPU row 3, projected 0, failed 2,' <<< "$out" &&
  pass "filed rows: machine, date, commit; the tally counts them" || { fail "filed source / tally"; printf '%s\n' "$out"; }
out=$(python3 -m harness.sweep.claims --sweeps "$tmp/sweeps" --results "$tmp/disagree" --run "$tmp/run" 2> /dev/null)
grep -q -- '^ratio claim .*  this run  *reproduced (noise' <<< "$out" &&
  grep -q -- '^busy claim .*filed from NVIDIA' <<< "$out" &&
  grep -q -- '^tally: reproduced here 2, reproduced on a filed GPU row 2, projected 0, failed 1,' <<< "$out" &&
  pass "--run: its rows say 'this run' and replace the filed ones" || { fail "--run"; printf '%s\n' "$out"; }
out=$(python3 -m harness.sweep.claims --sweeps "$tmp/sweeps" --results "$tmp/disagree" --brief 2> /dev/null)
[ "$(printf '%s\n' "$out" | awk '{ if (length($0) > 130) n++ } END { print n + 0 }')" = 0 ] &&
  grep -q -- '^ratio claim .*NVIDIA H100 80GB HBM3, undated, 01234567 ' <<< "$out" &&
  pass "--brief: lines within 130 characters" || { fail "--brief"; printf '%s\n' "$out"; }
exits 2 "--run without a directory" python3 -m harness.sweep.claims --sweeps "$tmp/sweeps" --results "$tmp/disagree" \
  --run "$tmp/nowhere"
python3 - "$tmp" > "$tmp/prov.txt" 2>&1 <<'EOF'
import json, os, sys
from harness.sweep import claims
d = os.path.join(sys.argv[1], "prov", "campaign")
os.makedirs(d)
with open(os.path.join(d, "h200-B-20261126T030225Z-manifest.json"), "w") as f:
    json.dump({"tag": "h200-B", "git_sha": "955be61e2b40", "gpu_name": "NVIDIA H200",
               "utc": "2026-11-26T03:02:25Z", "seconds": 454.2}, f)
ctx = {"results_dir": os.path.dirname(d)}
row = lambda utc, **k: dict({"env": {"git_sha": "955be61e2b40", "gpu_name": "NVIDIA H200", "utc": utc}}, **k)
print(claims.provenance([row("2026-11-26T02:56:20Z")], dict(ctx)))
print(claims.provenance([row("2026-11-26T05:00:00Z")], dict(ctx)))
print(claims.provenance([row("2026-11-26T02:56:20Z", _this_run=True)], dict(ctx)))
print(claims.provenance([row("2026-11-26T02:56:20Z", _this_run=True), row("2026-11-26T02:56:20Z")], dict(ctx)))
EOF
[ "$(cat "$tmp/prov.txt")" = "filed from campaign part h200-B, 2026-11-26, 955be61e2b40
filed from NVIDIA H200, 2026-11-26, 955be61e2b40
this run
this run + filed from campaign part h200-B, 2026-11-26, 955be61e2b40" ] &&
  pass "a filed GPU row names the campaign part whose manifest brackets it" || { fail "provenance"; cat "$tmp/prov.txt"; }

# Verdicts that can fail (issue 38): an extrapolation bar wider than max_bar (25%) that holds
# its error is inconclusive, not "error bars hold" (one outside it still fails); a deterministic
# projection prints no "noise ±0.0%".
python3 - > "$tmp/wide.txt" 2>&1 <<'EOF'
import sys
from harness.sweep import claims
env = {"git_sha": "0123456789ab", "git_dirty": False}
def ex(pred, E, check):
    return {"mode": "extrapolated", "system": "megatrain", "batch": 4, "layers_model": 8, "env": env,
            "tokens_per_s": 1.0, "step_ms": {"median": pred, "min": pred * (1 - E), "max": pred * (1 + E), "err_frac": E},
            "fit": {"depths": [2, 4], "holdout": {"depth": 6}, "check": {"depth": 8, "measured_ms": check,
                    "measured_min_ms": check, "measured_max_ms": check}}}
spec = {"against": "other"}
for name, r in (("wide inside", ex(1000, 0.76, 1800)), ("wide outside", ex(1000, 0.3, 2000)),
                ("narrow inside", ex(1000, 0.1, 950))):
    print(name, claims.t_extrapolation(spec, [r], {"all": {}})[2])
print(claims.verdict("agrees", [{"mode": "projected"}], {}, 0.0))
print(claims.verdict("agrees", [{"mode": "projected"}], {}, 0.02))
EOF
[ "$(cat "$tmp/wide.txt")" = "wide inside within
wide outside disagrees
narrow inside agrees
pending GPU (projection agrees)
pending GPU (projection agrees; noise ±2.0%)" ] && pass "a too-wide bar is inconclusive; a deterministic projection has no noise" ||
  { fail "wide bars / projection noise"; cat "$tmp/wide.txt"; }
finish
