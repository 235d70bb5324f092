#!/usr/bin/env bash
# The committed results/ as a whole: no row comes from a sweep entry or a tree state that
# no longer exists. Every row of results/*.jsonl (and env_*/microbench_* file) passes
# file_rows.py's checks (schema, min <= median <= max, clean tree, config_key still one of
# its sweep's configurations; against results/ itself, so a GPU row is bound to a manifest in
# results/campaign/ or filed as it is); every sweep that reproduce.sh runs on the CPU path has a
# row for each of its configurations and no error row; results/claims.md and plots/data/
# are what claims.py and export.py make from these rows. The Python that writes and reads
# rows (harness/resultslib, the sweep, the GPU campaign, the peers' shared code) imports
# with the standard library alone, as the GPU machine's python3 has it. Needs python3 (and cmp).
. "$(dirname "$0")/lib.sh" python3
hint="HINT: run \`make reproduce\` from a clean committed tree and commit results/, plots/data/, README.md, REPRODUCE.md"

if python3 -m harness.sweep.file_rows results --results results --dry-run > /dev/null 2> "$tmp/rows.err"; then
  echo "ok   every committed row is current, clean and well-formed ($(python3 -c "import sys; from harness.sweep import common; print(len(common.load_results('results')))") rows)"
else
  fail "committed rows"; grep -v "^file_rows: [a-z0-9_]*: " "$tmp/rows.err" | head -20; echo "$hint"
fi

python3 - > "$tmp/complete.txt" <<'PY'
import os, sys
from harness.sweep import common, sweeps
for s in sweeps.all_sweeps():
    if "cpu" not in s.get("paths", []):
        continue
    rows = common.load_jsonl(os.path.join("results", s["experiment"] + ".jsonl"))
    keys = {r.get("config_key") for r in rows}
    missing = [sweeps.label(c) for c in sweeps.expand(s) if sweeps.config_key(c) not in keys]
    errors = [r.get("error") for r in rows if "error" in r]
    if missing or errors:
        print(f"{s['experiment']}: {len(missing)} configuration(s) without a row (e.g. {missing[:1]}), "
              f"{len(errors)} error row(s) {errors[:1]}")
PY
[ -s "$tmp/complete.txt" ] && { fail "incomplete sweeps"; cat "$tmp/complete.txt"; echo "$hint"; } ||
  echo "ok   every CPU-path sweep has a row for each configuration and no error row"

python3 -m harness.sweep.claims --markdown "$tmp/claims.md" > /dev/null 2> "$tmp/claims.err"
cmp -s "$tmp/claims.md" results/claims.md && echo "ok   results/claims.md is what claims.py makes of the rows" ||
  { fail "results/claims.md differs from claims.py's table"; diff results/claims.md "$tmp/claims.md" | head; echo "$hint"; }
python3 -m harness.sweep.export --out "$tmp/data" 2> /dev/null
diff -r plots/data "$tmp/data" > "$tmp/data.diff" && echo "ok   plots/data/ is what export.py makes of the rows" ||
  { fail "plots/data/ differs from export.py's output"; head -20 "$tmp/data.diff"; echo "$hint"; }

# python3 -S: no site-packages. The peers' common.py imports torch only where a function needs it.
if python3 -S - > "$tmp/stdlib.txt" 2>&1 <<'PY'
import sys
from harness import resultslib  # noqa
from harness.sweep import common, run, claims, export, docs, file_rows, baselines  # noqa
from ci.gpu_campaign import main, pack, filing, estimate, runner  # noqa
from baselines.peers import common, cpu_optimizers, stage3_hooks, official_parse  # noqa
assert common.make_row and common.__file__.endswith("baselines/peers/common.py")
print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "numpy", "transformers", "deepspeed")))
PY
then [ "$(cat "$tmp/stdlib.txt")" = "[]" ] && echo "ok   resultslib, the sweep, the campaign and the peers' common.py import with the stdlib alone" ||
  fail "stdlib only: $(cat "$tmp/stdlib.txt")"
else fail "stdlib only: $(tail -1 "$tmp/stdlib.txt")"; fi

finish
