"""filing.py: what came back from the GPU machine, filed here.

`file DIR...` (DIR: a folder the device tool brought back, holding PART-manifest.json
and the archives): for each part, the results rows go through
harness/sweep/file_rows.py (every row checked; nothing of a part is filed if one fails),
the calibrated profile goes to experiments/hardware/NAME.json, the kernel labs' JSON
lines to results/labs/, and the part's summary and manifest to results/campaign/.
A dry run's folder is refused: its rows are tiny CPU runs. Names taken from what came
back (the manifest's part, tag and utc, the profile and lab files) are checked as plain
names before a path is made of them (resultslib/safepath.py), and every file is written
inside its folder (results/campaign, results/labs, experiments/hardware), atomically; a
part with a name that is not is refused whole.

`regenerate` (after committing what `file` wrote, so that new rows count as clean):
re-runs, with --force, every projection on a profile the campaign calibrated (the
gpu_predicted sweep, and any other sweep projecting on h100-128g / h200-128g), re-records
the sim regression baselines when one of those sweeps is a baseline, then the figures
(export.py, gnuplot), the claims table and the generated blocks of README/REPRODUCE.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

from harness import resultslib
from harness.resultslib import safepath
from harness.sweep import sweeps

from . import pack

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

LENT = tuple(resultslib.profiles())  # the lent machines' profiles: those with gpu.name_match


def say(msg):
    print(f"gpu_campaign: {msg}", file=sys.stderr, flush=True)


def _get(d, path):
    for k in path.split("."):
        if not isinstance(d, dict) or k not in d:
            return None, False
        d = d[k]
    return d, True


def _set(d, path, value):
    keys = path.split(".")
    for k in keys[:-1]:
        d = d.setdefault(k, {})
    d[keys[-1]] = value


def _split_source(p, key):
    """Before `key` gets a source of its own: an ancestor's source ("host.adamw_gbps" for
    "host.adamw_gbps.paper") is handed to each of the ancestor's other leaves and dropped,
    so no stale source speaks for a figure that now has its own."""
    parts = key.split(".")
    for i in range(len(parts) - 1, 0, -1):
        anc = ".".join(parts[:i])
        if anc not in p["sources"]:
            continue
        src = p["sources"].pop(anc)
        value, ok = _get(p, anc)
        def leaves(v, path):
            if isinstance(v, dict):
                for k, sub in v.items():
                    yield from leaves(sub, f"{path}.{k}")
            else:
                yield path
        for leaf in (leaves(value, anc) if ok else ()):
            if leaf != key and not leaf.startswith(key + ".") and leaf not in p["sources"]:
                p["sources"][leaf] = src


def merge_profile(old, new):
    """The profile `new` (one part's calibration) filed over `old` (what is there): each
    figure the new one measured or derived from a measurement replaces the old one with
    its source; every other figure keeps the old value and source, so calibrations from
    different parts (A's GEMM and host rates, C's attention tables) and later runs add
    up instead of the last part's base erasing the rest. Returns (merged, keys taken)."""
    if not old:
        return new, sorted((new.get("sources") or {}).keys())
    merged = json.loads(json.dumps(old))
    merged.setdefault("sources", {})
    taken = []
    srcs = new.get("sources") or {}
    # A derived figure comes along only where this part measured something in its section
    # (host.adamw_params_per_s from a measured host.adamw_gbps), not a base's derivation
    # from an assumption.
    measured_in = {k.split(".")[0] for k, v in srcs.items() if str(v).startswith("measured")}
    for key, src in sorted(srcs.items()):
        if not (str(src).startswith("measured") or (str(src).startswith("derived") and key.split(".")[0] in measured_in)):
            continue
        value, ok = _get(new, key)
        if not ok:
            continue
        _split_source(merged, key)
        _set(merged, key, value)
        merged["sources"][key] = src
        taken.append(key)
    return merged, taken


def part_names(m, d):
    """(manifest, part, stem of the filed names) of a part's manifest, every name from it
    checked (safepath.name), or PathError/ValueError naming what is not a plain name."""
    with open(safepath.inside(d, os.path.basename(m), "a part's manifest")) as f:
        man = resultslib.schema.loads(f.read())
    if not isinstance(man, dict):
        raise ValueError("not a JSON object")
    P = safepath.name(man.get("part"), "part")
    tag = safepath.name(man.get("tag") or P, "tag")
    when = str(man.get("utc") or "").replace("-", "").replace(":", "")
    stem = safepath.name(f"{tag}-{when}" if when else tag, "tag and utc")
    for f in (f"{P}-results.tar.gz", f"{P}-traces.tar.gz", f"{P}-summary.txt"):
        safepath.inside(d, f, "a part's file")  # none a symlink out of the folder
    return man, P, stem


def file_dirs(dirs, allow_dirty=False, dry_run=False, replace_gpu=False):
    # A part's folder, or one holding a folder per part (what `gpu_campaign.sh next` brings back).
    mans = sorted(m for d in dirs for pat in ("*-manifest.json", os.path.join("*", "*-manifest.json"))
                  for m in glob.glob(os.path.join(d, pat)))
    if not mans:
        say(f"no PART-manifest.json in {', '.join(dirs)}; HINT: the folder the device tool's files_at names")
        return 2
    bad, unbound = 0, False
    for m in mans:
        d = os.path.dirname(m)
        try:
            man, P, stem = part_names(m, d)
        except (OSError, ValueError) as e:  # safepath.PathError is a ValueError
            say(f"{m}: {e}: not filed")
            bad += 1
            continue
        if man.get("dry_run"):
            say(f"{m}: a dry run (tiny CPU rows): not filed")
            bad += 1
            continue
        tmp = tempfile.mkdtemp(prefix=f"mt-file-{P}-")
        try:
            for a in (f"{P}-results.tar.gz", f"{P}-traces.tar.gz"):
                if os.path.exists(os.path.join(d, a)):
                    pack.extract(os.path.join(d, a), tmp)
            # Every destination first, so a part with one name that leads out of its folder
            # files nothing (the rows included).
            results = os.path.join(REPO, "results")
            profs, copies = [], []
            try:
                for prof in sorted(glob.glob(os.path.join(tmp, "profile", "*.json"))):
                    name = safepath.name(os.path.basename(prof), "profile")
                    profs.append((prof, name, safepath.inside(os.path.join(REPO, "experiments"), "hardware/" + name,
                                                              "profile")))
                labs = sorted(f for f in glob.glob(os.path.join(tmp, "labs", "*")) if os.path.isfile(f))
                for f in labs + [m, os.path.join(d, f"{P}-summary.txt")]:
                    # Two folders of one part (a part re-run, or split over calls) keep both: the
                    # manifest's time is in the name (stem: tag-utc).
                    name = safepath.name(os.path.basename(f) if f in labs else
                                         f"{stem}-{os.path.basename(f).split('-', 1)[1]}", "filed name")
                    rel = ("labs/" if f in labs else "campaign/") + name
                    safepath.inside(results, rel, "filed name")  # no symlink (results/labs too) leading out
                    copies.append((f, rel))
            except safepath.PathError as e:
                say(f"part {P}: {e}: nothing of it filed")
                bad += 1
                continue
            rows = os.path.join(tmp, "rows")
            if os.path.isdir(rows) and (glob.glob(os.path.join(rows, "*.jsonl")) or
                                        glob.glob(os.path.join(rows, "*_*.json"))):
                cmd = [sys.executable, "-m", "harness.sweep.file_rows", os.path.abspath(rows),
                       "--manifest", os.path.abspath(m)]
                cmd += ["--allow-dirty"] * allow_dirty + ["--dry-run"] * dry_run + ["--replace-gpu"] * replace_gpu
                rc = subprocess.run(cmd, cwd=REPO).returncode
                if rc != 0:
                    say(f"part {P}: rows refused (file_rows.py says why above); its profile and labs not filed")
                    bad += 1
                    unbound |= rc == 2  # a row not bound to this call's manifest: bad input
                    continue
            for prof, name, dest_prof in profs:
                try:
                    with open(prof) as f:
                        p = resultslib.schema.loads(f.read())  # strictly: no NaN or Infinity
                except ValueError as e:
                    say(f"{prof}: not JSON ({e}): not filed")
                    bad += 1
                    continue
                if (not isinstance(p, dict) or p.get("schema") != "megatrain.hardware/1"
                        or name.removesuffix(".json") not in LENT):
                    say(f"{prof}: not a profile of a lent machine ({', '.join(LENT)}): not filed")
                    bad += 1
                    continue
                old = resultslib.load_json(dest_prof) if os.path.exists(dest_prof) else None
                merged, taken = merge_profile(old, p)
                say(f"part {P}: experiments/hardware/{name} <- {len(taken)} figures measured or derived here, "
                    f"the rest kept: {', '.join(taken[:6])}{'...' if len(taken) > 6 else ''}")
                if not dry_run:
                    safepath.inside(os.path.join(REPO, "experiments"), "hardware/" + name, "profile")
                    safepath.write_bytes(dest_prof, (json.dumps(merged, indent=2) + "\n").encode())
            for f, rel in copies:
                say(f"part {P}: {os.path.relpath(os.path.join(results, rel), REPO)}")
                if not dry_run and os.path.exists(f):
                    safepath.copy_into(f, results, rel, "filed name")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if bad:
        return 2 if unbound else 1
    say("filed. Next: commit results/ and experiments/hardware/, then "
        "`bash ci/gpu_campaign.sh --regenerate` (projections on the calibrated profile, figures, claims table)")
    return 0


def calibrated_profiles():
    out = []
    for n in LENT:
        p = resultslib.load_json(os.path.join(REPO, "experiments", "hardware", n + ".json"))
        if any(str(v).startswith("measured") for v in (p.get("sources") or {}).values()):
            out.append(n)
    return out


def run(cmd, **kw):
    say("$ " + " ".join(cmd))
    return subprocess.run(cmd, cwd=REPO, **kw).returncode


def regenerate(bin_dir):
    # the rule mt-env marks rows dirty by (harness/env.c): tracked changes and untracked files
    # outside results/ and plots/
    if subprocess.run(["git", "status", "--porcelain", "--untracked-files=normal", "--", ".", ":(exclude)results",
                       ":(exclude)plots"], cwd=REPO, capture_output=True, text=True).stdout.strip():
        say("WARNING: the tree has uncommitted changes: the rows made now count as dirty (commit what "
            "`--file` wrote first)")
    cal = calibrated_profiles()
    say(f"calibrated profiles: {', '.join(cal) or 'none (the projections keep their datasheet profiles)'}")
    force, baseline = [], False
    for s in sweeps.all_sweeps():
        hw = {os.path.basename(str(c["hardware"])).removesuffix(".json") for c in sweeps.expand(s)
              if c["mode"].startswith("projected")}
        if s["experiment"] == "gpu_predicted" or hw & set(cal):
            force.append(sweeps.rel_path(s["_path"]))
            baseline |= bool(s.get("baseline"))
    failed = 0
    env = dict(os.environ, MT_BIN=bin_dir)
    if force:
        failed += run([sys.executable, "-m", "harness.sweep.run", "--force", "--out-dir", "results"] + force, env=env) != 0
    if baseline and not failed:
        failed += run([sys.executable, "-m", "harness.sweep.baselines", "sim"]) != 0
    failed += run([sys.executable, "-m", "harness.sweep.export", "--out", "plots/data"]) != 0
    if shutil.which("gnuplot"):
        os.makedirs(os.path.join(REPO, "plots", "out"), exist_ok=True)
        for gp in sorted(glob.glob(os.path.join(REPO, "plots", "*.gp"))):
            if os.path.basename(gp) != "common.gp":
                failed += run(["gnuplot", os.path.relpath(gp, REPO)]) != 0
    else:
        say("no gnuplot: figures not drawn (make deps)")
        failed += 1
    failed += run([sys.executable, "-m", "harness.sweep.claims", "--markdown", "results/claims.md"],
                  stdout=subprocess.DEVNULL) != 0
    failed += run([sys.executable, "-m", "harness.sweep.docs", "--write"]) != 0
    say("regenerated" if not failed else f"{failed} step(s) failed")
    return 1 if failed else 0
