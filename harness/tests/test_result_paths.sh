#!/usr/bin/env bash
# The scripts around the binary write only where they should (harness/resultslib/safepath.py):
# a path taken from data is a name, never joined as given. file_rows refuses a row whose
# trace or experiment climbs out with '..' or is absolute, and a symlink in results/ that
# leads out; the campaign's filing (run from a copy of the scripts, so that "outside
# results/" is a folder of this test) refuses a manifest whose tag or part is a path, a
# row of its archive whose trace climbs into the code, and a results/ symlink leading out.
# Nothing is written in each case: the files outside keep their bytes. And no tool writes
# over its own input (the same file, a symlink or a hard link to it). Needs python3 and jq.
. "$(dirname "$0")/lib.sh" python3 jq

# ---- a clean row of a one-configuration sweep, as a run elsewhere writes it
mkdir -p "$tmp/sweeps"
cat > "$tmp/sweeps/t_path.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_path", "paths": ["gpu"],
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "mode": "projected", "hardware": "h100-128g",
              "batch": 2, "seq_len": 16, "precision": "paper", "steps": 4, "warmup": 2},
 "configs": [{"schedule": "megatrain", "keep_trace": true}]}
EOF
# mkrow SWEEPS_DIR OUT.jsonl [JQ-EDIT]: the sweep's row, edited
mkrow() {
  python3 - "$1" <<'EOF' | jq -c "${3:-.}" > "$2"
import json, sys
from harness.sweep import common, sweeps
sweeps.set_dir(sys.argv[1])
c = sweeps.expand(sweeps.by_experiment()["t_path"])[0]
r = {k: None for k in common.RESULT_KEYS}
r.update(schema=common.RESULTS_SCHEMA, experiment="t_path", system="megatrain", mode="projected", model="m",
         params=1000, layers_run=5, layers_model=5, batch=2, seq_len=16, precision="paper",
         step_ms={"median": 10.0, "min": 9.0, "max": 11.0, "n": 2}, tokens_per_s=3200.0, backend=c.get("backend"),
         hardware=c.get("hardware"), config_key=sweeps.config_key(c), trace="traces/t_path.json",
         sweep={"file": "t_path.json", "hardware_override": None},
         env=dict({k: None for k in common.ENV_KEYS}, git_sha="0123456789ab", git_dirty=False))
print(json.dumps(r))
EOF
}
W=$tmp/w  # W/in: what came back; W/repo/results: where it is filed; W/repo/code, W/outside: not to be touched
fresh() {
  rm -rf "$W" && mkdir -p "$W/in/traces" "$W/repo/results" "$W/repo/code" "$W/outside" "$W/code"
  echo '{"traceEvents": []}' > "$W/in/traces/t_path.json"
  echo original > "$W/repo/code/x.py"
  echo pwned > "$W/code/x.py"
}
untouched() { # untouched NAME: nothing written outside W/repo/results, no rows filed
  local extra
  extra=$(find "$W/outside" "$W/repo" -type f ! -path "$W/repo/code/x.py" ! -path "$W/repo/results/*" 2>/dev/null)
  [ "$(cat "$W/repo/code/x.py")" = original ] && [ -z "$extra" ] && [ ! -e "$W/repo/results/t_path.jsonl" ] &&
    [ -z "$(ls -A "$W/outside")" ]
}
file_rows() { python3 -m harness.sweep.file_rows --sweeps "$tmp/sweeps" "$@"; }
# refuse NAME [file_rows options]: the row in W/in refused, with a line naming it, nothing written
refuse() {
  local name=$1 rc; shift
  file_rows "$W/in" --results "$W/repo/results" "$@" > /dev/null 2> "$tmp/err"; rc=$?
  if [ "$rc" != 0 ] && ! grep -q Traceback "$tmp/err" && grep -q "t_path.jsonl:1: \|leads out\|not a plain name\|not a relative path" "$tmp/err" && untouched; then
    pass "file_rows refuses $name (exit $rc), nothing written"
  else
    fail "file_rows $name: exit $rc"; head -c 800 "$tmp/err"; echo; find "$W" -type f | head
  fi
}

fresh; mkrow "$tmp/sweeps" "$W/in/t_path.jsonl"
file_rows "$W/in" --results "$W/repo/results" 2> "$tmp/ok.err" && [ -s "$W/repo/results/traces/t_path.json" ] &&
  [ -s "$W/repo/results/t_path.jsonl" ] && pass "a good row and its trace are filed" || { fail "good row"; cat "$tmp/ok.err"; }

fresh; mkrow "$tmp/sweeps" "$W/in/t_path.jsonl" '.trace = "../code/x.py"'
refuse "a trace climbing out with ../ (it would overwrite code)"
fresh; mkrow "$tmp/sweeps" "$W/in/t_path.jsonl" '.trace = "traces/../../code/x.py"'
refuse "a trace under traces/ climbing out"
fresh; mkrow "$tmp/sweeps" "$W/in/t_path.jsonl" ".trace = \"$W/code/x.py\""
refuse "an absolute trace"
fresh; mkrow "$tmp/sweeps" "$W/in/t_path.jsonl" '.experiment = "../outside/t_path"'
refuse "an experiment climbing out with ../" --unswept
fresh; mkrow "$tmp/sweeps" "$W/in/t_path.jsonl" ".experiment = \"$W/outside/t_path\""
refuse "an absolute experiment" --unswept
fresh; mkrow "$tmp/sweeps" "$W/in/t_path.jsonl"; ln -s "$W/outside" "$W/repo/results/traces"
refuse "results/traces a symlink leading out"
fresh; mkrow "$tmp/sweeps" "$W/in/t_path.jsonl"; ln -s "$W/outside/t_path.jsonl" "$W/repo/results/t_path.jsonl"
file_rows "$W/in" --results "$W/repo/results" > /dev/null 2> "$tmp/err"; rc=$?
[ "$rc" != 0 ] && [ ! -e "$W/outside/t_path.jsonl" ] && [ -L "$W/repo/results/t_path.jsonl" ] && grep -q "leads out" "$tmp/err" &&
  pass "file_rows refuses results/EXP.jsonl a symlink leading out (exit $rc)" || { fail "results symlink: exit $rc"; cat "$tmp/err"; }
fresh; mkrow "$tmp/sweeps" "$W/in/t_path.jsonl"; rm "$W/in/traces/t_path.json"; ln -s "$W/code/x.py" "$W/in/traces/t_path.json"
refuse "a trace in DIR that is a symlink out of DIR"
fresh; mkrow "$tmp/sweeps" "$W/in/t_path.jsonl"
file_rows "$W/in" --results "$W/in" > /dev/null 2> "$tmp/err"; rc=$?
[ "$rc" = 2 ] && grep -q "write over its input" "$tmp/err" && pass "file_rows refuses DIR = the results dir (its own input)" ||
  { fail "file_rows DIR = results: exit $rc"; cat "$tmp/err"; }

# ---- the campaign's filing, from a copy of the scripts: its REPO is W/repo
fresh
cp -r harness ci "$W/repo/" && mkdir -p "$W/repo/experiments" && cp -r experiments/sweeps experiments/hardware experiments/models "$W/repo/experiments/"
rm -rf "$W/repo/harness/tests" && cp "$tmp/sweeps/t_path.json" "$W/repo/experiments/sweeps/"
mkdir -p "$W/repo/megatrain/tests/data" && cp megatrain/tests/data/tiny5_llama.json "$W/repo/megatrain/tests/data/"
find "$W/repo" -type f | sort > "$tmp/repo_files"
# part P: a part's folder (manifest, summary, results archive with one row) under $tmp/parts/P
part() { # part NAME MANIFEST-JQ-EDIT ROW-JQ-EDIT
  local d=$tmp/parts/$1 x=$tmp/parts/$1.x
  rm -rf "$d" "$x" && mkdir -p "$d" "$x/rows/traces" "$x/code"
  mkrow "$tmp/sweeps" "$x/rows/t_path.jsonl" "$3"
  echo '{"traceEvents": []}' > "$x/rows/traces/t_path.json"
  echo pwned > "$x/code/x.py"
  tar -C "$x" -czf "$d/A-results.tar.gz" rows code
  echo summary > "$d/A-summary.txt"
  jq -n -c '{part: "A", tag: "h100-A", dry_run: false, utc: "2026-11-28T00:00:00Z", files: [], steps: []}' | jq -c "$2" > "$d/A-manifest.json"
}
filing() { (cd "$W/repo" && python3 -m ci.gpu_campaign.main file "$@"); }  # the copy's modules, not ours
# nothing outside W/repo/results changed: the copy's own files as they were, nothing new beside them
clean_repo() {
  [ "$(find "$W/repo" -type f ! -path "$W/repo/results/*" ! -name '*.pyc' | sort)" = "$(grep -v '\.pyc$' "$tmp/repo_files")" ] &&
    [ "$(cat "$W/repo/code/x.py")" = original ] && [ -z "$(ls -A "$W/outside")" ] && [ ! -e "$W/repo/results/t_path.jsonl" ]
}
frefuse() { # frefuse NAME PART: the filing refuses the part, one line, nothing of it written
  local rc
  filing "$tmp/parts/$2" --allow-dirty > /dev/null 2> "$tmp/ferr"; rc=$?
  if [ "$rc" != 0 ] && ! grep -q Traceback "$tmp/ferr" && clean_repo; then
    pass "the filing refuses $1 (exit $rc), nothing written outside results/"
  else
    fail "filing $1: exit $rc"; head -c 800 "$tmp/ferr"; echo
    find "$W" -newer "$tmp/repo_files" -type f ! -name '*.pyc' | head
  fi
}
part good '.' '.'
filing "$tmp/parts/good" --allow-dirty > /dev/null 2> "$tmp/ferr" && [ -s "$W/repo/results/t_path.jsonl" ] &&
  ls "$W/repo/results/campaign/h100-A-20261128T000000Z-manifest.json" > /dev/null &&
  pass "the filing files a good part (rows, manifest, summary)" || { fail "filing a good part"; cat "$tmp/ferr"; }
rm -rf "$W/repo/results" && mkdir -p "$W/repo/results"
part tag '.tag = "../../outside/pwn"' '.'
frefuse "a manifest tag climbing out with ../" tag
part abstag ".tag = \"$W/outside/pwn\"" '.'
frefuse "an absolute manifest tag" abstag
part partname '.part = "../A"' '.'
frefuse "a manifest part that is a path" partname
part trace '.' '.trace = "traces/../../code/x.py"'
frefuse "an archived row whose trace climbs into the code" trace
part exp '.' '.experiment = "../code/x"'
frefuse "an archived row whose experiment is a path" exp
part good2 '.' '.'
ln -s "$W/outside" "$W/repo/results/campaign"
frefuse "results/campaign a symlink leading out" good2
rm "$W/repo/results/campaign"

# ---- no tool writes over its own input
mkdir -p "$tmp/own" && cp results/gpu_goal.jsonl results/c2_cpu.jsonl "$tmp/own/" && cp "$tmp/own/gpu_goal.jsonl" "$tmp/own.before"
own() { # own NAME FILE CMD...: refused (non-zero, a line saying so), FILE unchanged
  local name=$1 f=$2 rc; shift 2
  "$@" > /dev/null 2> "$tmp/oerr"; rc=$?
  if [ "$rc" != 0 ] && grep -qi "input" "$tmp/oerr" && cmp -s "$f" "$tmp/own.before" && ! grep -q Traceback "$tmp/oerr"; then
    pass "$name (exit $rc)"
  else
    fail "$name: exit $rc"; head -3 "$tmp/oerr"; cmp "$f" "$tmp/own.before"
  fi
}
own "claims --markdown onto a results file it reads" "$tmp/own/gpu_goal.jsonl" \
  python3 -m harness.sweep.claims --results "$tmp/own" --markdown "$tmp/own/gpu_goal.jsonl"
ln -s "$tmp/own/gpu_goal.jsonl" "$tmp/soft.md"
own "claims --markdown onto a symlink to an input" "$tmp/own/gpu_goal.jsonl" \
  python3 -m harness.sweep.claims --results "$tmp/own" --markdown "$tmp/soft.md"
ln "$tmp/own/gpu_goal.jsonl" "$tmp/hard.md"
own "claims --markdown onto a hard link to an input" "$tmp/own/gpu_goal.jsonl" \
  python3 -m harness.sweep.claims --results "$tmp/own" --markdown "$tmp/hard.md"
own "export --out onto the results it reads" "$tmp/own/gpu_goal.jsonl" \
  python3 -m harness.sweep.export --results "$tmp/own" --out "$tmp/own"
cp "$tmp/own/gpu_goal.jsonl" "$tmp/text.txt" && cp "$tmp/text.txt" "$tmp/own.before"
own "tokenize --out onto its input text" "$tmp/text.txt" \
  python3 -m megatrain.tools.tokenize --bytes --out "$tmp/text.txt" "$tmp/text.txt"
ln -s "$tmp/text.txt" "$tmp/text.link"
own "tokenize --out onto a symlink to its input" "$tmp/text.txt" \
  python3 -m megatrain.tools.tokenize --bytes --out "$tmp/text.link" "$tmp/text.txt"
cp experiments/hardware/h100-128g.json "$tmp/base.json" && cp "$tmp/base.json" "$tmp/own.before"
echo '{"utc": "2026-11-28T00:00:00Z", "gpu_name": "x"}' > "$tmp/env.json"
ln "$tmp/base.json" "$tmp/base.hard"
own "calibrate_profile --out onto a hard link to its base" "$tmp/base.json" \
  python3 -m harness.calibrate_profile "$tmp/base.json" --env "$tmp/env.json" --attention "$tmp/env.json" --out "$tmp/base.hard"
# ... nor into a folder it reads, nor fills a folder that holds what it reads; a peer never
# appends its row to its model config or the log it parses; an --out that is a folder is a
# one-line refusal
mkdir -p "$tmp/own/sub" && cp "$tmp/own/gpu_goal.jsonl" "$tmp/own.before"
own "export --out inside the results folder it reads" "$tmp/own/gpu_goal.jsonl" \
  python3 -m harness.sweep.export --results "$tmp/own" --out "$tmp/own/sub"
[ -z "$(ls -A "$tmp/own/sub")" ] || fail "export wrote into the results folder"
mkdir -p "$tmp/holder" && cp -r "$tmp/own" "$tmp/holder/results"
own "export --out a folder holding the results it reads" "$tmp/holder/results/gpu_goal.jsonl" \
  python3 -m harness.sweep.export --results "$tmp/holder/results" --out "$tmp/holder"
fresh; mkrow "$tmp/sweeps" "$W/in/t_path.jsonl"
file_rows "$W/in" --results "$W/in/filed" > /dev/null 2> "$tmp/err"; rc=$?
[ "$rc" = 2 ] && grep -q "input" "$tmp/err" && [ ! -e "$W/in/filed" ] && pass "file_rows refuses --results inside DIR (exit 2)" ||
  { fail "file_rows --results inside DIR: exit $rc"; cat "$tmp/err"; }
mkdir -p "$W/repo/results/incoming" && cp "$W/in/t_path.jsonl" "$W/repo/results/incoming/"
file_rows "$W/repo/results/incoming" --results "$W/repo/results" > /dev/null 2> "$tmp/err"; rc=$?
[ "$rc" = 2 ] && grep -q "input" "$tmp/err" && [ ! -e "$W/repo/results/t_path.jsonl" ] &&
  pass "file_rows refuses DIR inside --results (exit 2)" || { fail "file_rows DIR inside --results: exit $rc"; cat "$tmp/err"; }
printf '[INFO] a log\n' > "$tmp/peer.log" && cp "$tmp/peer.log" "$tmp/own.before"
own "official_parse --out onto the log it parses" "$tmp/peer.log" \
  python3 -m baselines.peers.official_parse --log "$tmp/peer.log" --config megatrain/tests/data/tiny5_llama.json \
  --batch 1 --seq-len 8 --out "$tmp/peer.log"
cp megatrain/tests/data/tiny5_llama.json "$tmp/cfg.json" && cp "$tmp/cfg.json" "$tmp/own.before"
ln -s "$tmp/cfg.json" "$tmp/cfg.link"
own "run_peers.sh --out onto a symlink to its model config" "$tmp/cfg.json" \
  bash baselines/peers/run_peers.sh --config "$tmp/cfg.json" --peers fsdp2_offload --batches 1 --out "$tmp/cfg.link"
mkdir -p "$tmp/fakebin" && printf '#!/bin/sh\nexit 3\n' > "$tmp/fakebin/mt-microbench" && chmod +x "$tmp/fakebin/mt-microbench"
cp "$tmp/fakebin/mt-microbench" "$tmp/own.before"
own "cpu_optimizers --out onto the benchmark binary it runs" "$tmp/fakebin/mt-microbench" \
  python3 -m baselines.peers.cpu_optimizers --bin "$tmp/fakebin" --out "$tmp/fakebin/mt-microbench"
mkdir -p "$tmp/model" && echo '{"vocab_size": 256}' > "$tmp/model/config.json" && cp "$tmp/model/config.json" "$tmp/own.before"
own "tokenize --out inside the model folder it reads" "$tmp/model/config.json" \
  python3 -m megatrain.tools.tokenize --model "$tmp/model" --out "$tmp/model/config.json" "$tmp/text.txt"
mkdir -p "$tmp/pc" && echo band > "$tmp/pc/compare.tsv" && cp "$tmp/pc/compare.tsv" "$tmp/own.before"
own "plan_compare --out holding its MT_SIM_VALIDATION under an output's name" "$tmp/pc/compare.tsv" \
  env MT_SIM_VALIDATION="$tmp/pc/compare.tsv" python3 -m harness.plan_compare --out "$tmp/pc"
# an --out that is a folder: one line, exit non-zero, no traceback, the folder as it was
mkdir -p "$tmp/outdir"
for t in "claims --markdown|python3 -m harness.sweep.claims --results $tmp/own --markdown $tmp/outdir" \
         "calibrate_profile --out|python3 -m harness.calibrate_profile $tmp/base.json --env $tmp/env.json --attention $tmp/env.json --out $tmp/outdir" \
         "tokenize --out|python3 -m megatrain.tools.tokenize --bytes --out $tmp/outdir $tmp/text.txt" \
         "a peer's --out|python3 -m baselines.peers.official_parse --log $tmp/peer.log --config megatrain/tests/data/tiny5_llama.json --batch 1 --seq-len 8 --out $tmp/outdir"; do
  name=${t%%|*}; cmd=${t#*|}
  $cmd > /dev/null 2> "$tmp/err"; rc=$?
  [ "$rc" != 0 ] && [ "$(grep -c . "$tmp/err")" -le 3 ] && grep -q "folder\|directory" "$tmp/err" && ! grep -q Traceback "$tmp/err" &&
    [ -d "$tmp/outdir" ] && [ -z "$(ls -A "$tmp/outdir")" ] && pass "$name a folder: refused in a line (exit $rc)" ||
    { fail "$name a folder: exit $rc"; head -5 "$tmp/err"; }
done
# the campaign's archives are replaced whole: an interrupted pack leaves the archive that was
# there before, and no half file beside it
mkdir -p "$tmp/pk/src" && echo row > "$tmp/pk/src/a.jsonl" && echo old > "$tmp/pk/A-results.tar.gz"
python3 - "$tmp/pk" > /dev/null 2> "$tmp/err" <<'EOF'
import os, sys
from ci.gpu_campaign import pack
d = sys.argv[1]
def boom(tf, root, arc, skip, cap):
    tf.fileobj.write(b"half")
    raise KeyboardInterrupt
pack.add_tree = boom
try:
    pack.tar(os.path.join(d, "A-results.tar.gz"), [(os.path.join(d, "src"), "rows", None, False)])
except KeyboardInterrupt:
    pass
EOF
[ "$(cat "$tmp/pk/A-results.tar.gz")" = old ] && [ "$(ls -A "$tmp/pk" | grep -c tmp)" = 0 ] &&
  pass "an interrupted pack leaves the old archive whole and no temp file" || { fail "interrupted pack"; ls -la "$tmp/pk"; cat "$tmp/err"; }
# run_peers.sh's lists are words, not globs nor code: a batch '*' or a sequence length 'x;y'
# is refused before anything runs or is appended
for bad in "--batches *" "--seq-len x;y"; do
  rm -f "$tmp/rp.jsonl"; read -ra opt <<< "$bad"
  bash baselines/peers/run_peers.sh --config megatrain/tests/data/tiny5_llama.json --peers fsdp2_offload "${opt[@]}" \
    --out "$tmp/rp.jsonl" > /dev/null 2> "$tmp/err"; rc=$?
  [ "$rc" = 2 ] && [ ! -e "$tmp/rp.jsonl" ] && grep -q "not a whole number" "$tmp/err" &&
    pass "run_peers.sh refuses $bad (exit 2), nothing appended" || { fail "run_peers.sh $bad: exit $rc"; tail -3 "$tmp/err"; }
done
# a hardware profile's name is a name: '../x' given to --hardware never reads a file outside
# the profiles' folder (cost_sources, run.py's override), refused in a line (exit 2)
mkdir -p "$tmp/hw/profiles" && cp experiments/hardware/h200-128g.json "$tmp/hw/outside.json"
MT_HARDWARE_DIR=$tmp/hw/profiles python3 -m harness.sweep.cost_sources ../outside > "$tmp/out" 2> "$tmp/err"; rc=$?
[ "$rc" = 2 ] && [ ! -s "$tmp/out" ] && grep -q "not a plain name" "$tmp/err" && ! grep -q Traceback "$tmp/err" &&
  pass "cost_sources refuses the profile name ../outside (exit 2)" || { fail "cost_sources ../outside: exit $rc"; head -3 "$tmp/err"; }
MT_HARDWARE_DIR=$tmp/hw/profiles python3 -m harness.sweep.run --out-dir "$tmp/hw/res" --hardware ../outside \
  "$tmp/sweeps/t_path.json" > /dev/null 2> "$tmp/err"; rc=$?
[ "$rc" = 2 ] && [ ! -e "$tmp/hw/res/t_path.jsonl" ] && grep -q "not a plain name" "$tmp/err" && ! grep -q Traceback "$tmp/err" &&
  pass "run.py refuses --hardware ../outside before running (exit 2)" || { fail "run.py --hardware ../outside: exit $rc"; head -3 "$tmp/err"; }
# a sweep keeping a trace copies it into --out-dir's traces/ whole, never through a link
# there leading out: the configuration is an error row and nothing is written outside
if [ -x "$MT_BIN/megatrain" ] && [ -x "$MT_BIN/mt-env" ]; then
  rm -rf "$tmp/tr" && mkdir -p "$tmp/tr/res" "$tmp/tr/outside" && ln -s "$tmp/tr/outside" "$tmp/tr/res/traces"
  python3 -m harness.sweep.run --out-dir "$tmp/tr/res" "$tmp/sweeps/t_path.json" > /dev/null 2> "$tmp/err"; rc=$?
  [ "$rc" = 1 ] && [ -z "$(ls -A "$tmp/tr/outside")" ] && jq -e '.error | test("leads out")' "$tmp/tr/res/t_path.jsonl" > /dev/null &&
    pass "the sweep does not copy a trace through results/traces linked out (an error row)" ||
    { fail "sweep trace through a link: exit $rc"; tail -3 "$tmp/err"; ls "$tmp/tr/outside"; }
  rm "$tmp/tr/res/traces"
  python3 -m harness.sweep.run --out-dir "$tmp/tr/res" --force "$tmp/sweeps/t_path.json" > /dev/null 2> "$tmp/err" &&
    [ -s "$tmp/tr/res/$(jq -r .trace "$tmp/tr/res/t_path.jsonl")" ] && pass "without the link, its trace is kept" ||
    { fail "sweep trace kept"; tail -3 "$tmp/err"; }
fi
finish
