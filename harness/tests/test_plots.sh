#!/usr/bin/env bash
# plots/*.gp (issue 40): each figure renders from the committed plots/data (and the compare
# and spans data in plots/out) without a gnuplot warning, and what it draws reads plainly:
# legends are plain text (enhanced-text markup turned "deepspeed_zero3" into a subscript),
# no label sits over a point (predicted.png's per-point labels overlapped), every series of
# predicted.png names its model, ablations.png draws the rows' ranges as error bars (and its
# data has them: the CPU rows' min..max around the median), bars of one variant line up.
. "$(dirname "$0")/lib.sh" python3 gnuplot

mkdir -p "$tmp/out"
cp plots/out/compare.* plots/out/spans.* "$tmp/out/" 2> /dev/null
for gp in plots/*.gp; do
  [ "$gp" = plots/common.gp ] && continue
  n=$(basename "$gp" .gp)
  gnuplot -e "OUT='$tmp/out/'" "$gp" 2> "$tmp/$n.err"
  rc=$?
  [ $rc -eq 0 ] && [ -s "$tmp/out/$n.png" ] && [ -s "$tmp/out/$n.svg" ] && pass "$n renders" ||
    fail "$n renders (exit $rc): $(head -c 300 "$tmp/$n.err")"
  # (a series drawn for the rows of one kind only, NaN for the rest, may have none: harmless)
  grep -v "Skipping data file with no valid points" "$tmp/$n.err" > "$tmp/$n.warn"
  [ ! -s "$tmp/$n.warn" ] && pass "$n: no gnuplot warning" || fail "$n: gnuplot says: $(head -c 300 "$tmp/$n.warn")"
done

python3 - "$tmp/out" <<'EOF2' && pass "the figures' data and legends" || fail "the figures' data and legends"
import re, sys
out = sys.argv[1]
bad = []

def blocks(name):
    """plots/data/NAME.tsv: [(title, [row, ...]), ...]"""
    res = []
    for chunk in open(f"plots/data/{name}.tsv").read().split("\n\n\n"):
        lines = [l for l in chunk.strip("\n").split("\n") if l]
        if not lines:
            continue
        title = lines[0].split(": ", 1)[1]
        res.append((title, [l.split("\t") for l in lines if not l.startswith("#")]))
    return res

def titles(name):
    return re.findall(r'"((?:[^"\\]|\\.)*)"', re.search(r"array T\[N\] = \[(.*)\]", open(f"plots/data/{name}.gpi").read()).group(1))

# Plain-text legends: a series title with "_" is in the SVG as written, not split by a subscript.
for name, svg in (("batch_gpu", "batch"), ("batch_cpu", "batch"), ("model_size", "model_size"), ("predicted", "predicted"),
                  ("ablations", "ablations"), ("gpus_scaling", "gpus_scaling"), ("context", "context")):
    text = open(f"{out}/{svg}.svg").read()
    for t in titles(name):
        if "_" in t and t.replace("&", "&amp;") not in text:
            bad.append(f"{svg}.svg: the legend '{t}' is not drawn as written (enhanced text?)")
if not any("_" in t for t in titles("batch_gpu")):
    bad.append("batch_gpu: no legend with '_' to check (deepspeed_zero3 expected)")

# predicted: every series names its model; no point's label drawn over it.
models = set()
for title, rows in blocks("predicted"):
    model = rows[0][2].split()[0]
    models.add(model)
    if not title.startswith(model + ": "):
        bad.append(f"predicted: series '{title}' does not name its model {model}")
    if any(r[2].split()[0] != model for r in rows):
        bad.append(f"predicted: series '{title}' mixes models")
svg = open(f"{out}/predicted.svg").read()
for title, rows in blocks("predicted"):
    for r in rows:
        if f">{r[2]}<" in svg:
            bad.append(f"predicted.svg: the label '{r[2]}' is drawn over its point")

# gpus_scaling: a model in every series.
for t in titles("gpus_scaling"):
    if not re.search(r"qwen|llama|dense", t):
        bad.append(f"gpus_scaling: series '{t}' names no model")

# ablations: each row's range around its median, and the measured (CPU) rows' is not empty;
# one x per variant across the series (the same variant, the same x).
x_of = {}
for title, rows in blocks("ablations"):
    for r in rows:
        x, rel, v, lo, hi = float(r[0]), float(r[1]), r[2], float(r[4]), float(r[5])
        if not (lo <= rel * (1 + 1e-5) and rel <= hi * (1 + 1e-5)):
            bad.append(f"ablations: {title} {v}: {rel} outside its range {lo}..{hi}")
        if "measured" in title and not hi > lo:
            bad.append(f"ablations: {title} {v}: a measured row without its range ({lo}..{hi})")
        if x_of.setdefault(v, x) != x:
            bad.append(f"ablations: variant {v} at x {x} in '{title}', at {x_of[v]} in another series")
gp = open("plots/ablations.gp").read()
if not re.search(r":2:5:6 with yerrorbars", gp):
    bad.append("plots/ablations.gp: no error bars from the rows' ranges (columns 5:6)")

for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
EOF2
finish
