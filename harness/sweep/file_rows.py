#!/usr/bin/env python3
"""file_rows.py: files the results a run wrote elsewhere (a GPU campaign's $OUT, another
machine's results/) into results/, under the same rules as a sweep run here.

    python3 -m harness.sweep.file_rows DIR [--results results] [--allow-dirty] [--unswept]
        [--replace-gpu] [--manifest PART-manifest.json]... [--dry-run]

DIR holds what `harness/sweep/run.py --out-dir DIR` wrote: <experiment>.jsonl files,
traces/, and optionally env_<host>.json and microbench_<host>.json. Every row is
checked first, and nothing is filed if one fails:
  - the results schema: every docs/DESIGN.md#results key and env key, a known mode, and where
    step_ms is set min <= median <= max (an extrapolated row also carries err_frac);
  - the tree that made it: env.git_sha set and env.git_dirty false (--allow-dirty
    admits a dirty or unknown tree; the claims table and figures still leave such
    rows out unless they are asked to take them too);
  - its sweep: experiments/sweeps/ names the experiment and the row's config_key is one
    of the configurations that sweep expands to now (with the row's --hardware
    override); --unswept admits rows of experiments no sweep names (e.g. a peer run);
  - where it was made: the backend its configuration names, and a measured CUDA row on a
    machine whose env names a GPU;
  - what it replaces: a row measured on one GPU does not replace a filed row of the same
    configuration measured on another (--replace-gpu lets it);
  - the campaign call that made it: a row made on a GPU machine (env.gpu_name set), and any
    row carrying a call id, is filed only with that call's manifest (--manifest, DIR's, or
    one filed in RESULTS/campaign/), which must list its configuration as made, not as "not
    reached" (binding_problems). A row already filed as it is passes unchanged.
Paths taken from the rows are names, never joined as given: `experiment` is a plain name,
`trace` a relative path under traces/, and each file read from DIR or written into the
results dir must resolve inside it (no '..', no absolute path, no symlink leading out),
or nothing is filed; DIR may not be the results dir itself (the filing would write over
its input), except under --dry-run, which writes nothing. Then each experiment's file is
rewritten as a sweep run would: the new rows replace
rows of the same configuration, rows of entries no longer in the sweep go, and the file
keeps the sweep's order. Kept traces are copied to results/traces/; env and microbench
files are copied after the same tree check. Exit 0 filed, 1 refused, 2 bad usage or a row not
bound to its call's manifest.
"""
import argparse
import calendar
import glob
import json
import os
import re
import sys
import time

from . import common, sweeps
from .common import REPO, die, resultslib, safepath

MODES = resultslib.MODES


def row_problems(r, allow_dirty, unswept, table):
    """What is wrong with a row (empty list: it may be filed): first the schema every
    reader checks (resultslib.row_problems: keys, types, finite figures, min <= median <=
    max, a plain experiment name, a trace under traces/), then the filing's own rules."""
    p = resultslib.row_problems(r, "results")
    if p:
        return p
    env = r["env"]
    state = common.tree_state(r)
    if state != "clean" and not allow_dirty:
        p.append(f"made from a {state} tree (git_dirty {env.get('git_dirty')}); HINT: run from a clean committed "
                 f"tree, or set MT_GIT_SHA and MT_GIT_DIRTY=0 where there is no .git")
    elif not env.get("git_sha") and not allow_dirty:
        p.append("no git_sha: the tree that made it is unknown")
    exp = r.get("experiment")
    if exp in table:
        cfg = sweeps.current_configs(exp, sweeps.row_override(r), table).get(r.get("config_key"))
        if cfg is None:
            p.append(f"config_key {r.get('config_key')} is not a configuration of {table[exp]['_path']} now "
                     f"(the entry changed or was removed)")
        else:
            p += belongs(r, cfg, env)
    elif not unswept:
        p.append(f"no sweep file names experiment {exp!r}; HINT: --unswept files it anyway")
    return p


CALL_KEY = "campaign_call"   # the id of the campaign call that made a row (runner.py sets it)
# before call ids, a filed manifest's name held its call: <gpu>-<part>-<utc>-manifest.json
FILED_NAME = re.compile(r"^([a-z0-9]+-[A-Za-z0-9]+-\d{8}T\d{6}Z)-manifest\.json$")


def load_manifests(paths):
    """{call id: (manifest, path)} of the manifests at PATHS that read as JSON: a call's id is
    its manifest's call_id, or for one filed before calls had ids, its filed name's stem."""
    out = {}
    for path in paths:
        try:
            with open(path) as f:
                man = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(man, dict):
            continue
        old = FILED_NAME.match(os.path.basename(path))
        call = man.get("call_id")
        if call or old:
            out.setdefault(call or old.group(1), (man, path))
    return out


def utc_s(text):
    try:
        return calendar.timegm(time.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None


def binding_problems(r, manifests, dry_ok=False):
    """What is wrong with a row's binding to the campaign call that made it (empty: none
    needed, or bound). Its manifest must list its configuration among the rows the call
    made; a manifest from before calls had ids lists none, so there the row's tree and the
    time its env was taken must fall inside that call (what the old rows were bound by)."""
    env = r.get("env") if isinstance(r.get("env"), dict) else {}
    call = r.get(CALL_KEY)
    if not call:
        return [f"made on a GPU machine ({env['gpu_name']}) but no {CALL_KEY}: a GPU row is filed only with the "
                f"manifest of the campaign call that made it; HINT: run it through ci/gpu_campaign.sh"] \
            if env.get("gpu_name") else []
    if call not in manifests:
        return [f"no manifest of its campaign call {call}; HINT: file the call's folder (ci/gpu_campaign.sh --file "
                f"DIR) or pass --manifest PART-manifest.json"]
    man, path = manifests[call]
    if man.get("dry_run") and not dry_ok:
        return [f"its call {call} was a dry run ({path}): tiny CPU rows are not filed"]
    exp, key = r.get("experiment"), r.get("config_key")
    step = next((st for st in man.get("steps", []) if st.get("kind") == "sweep" and st.get("name") == exp), None)
    if step is None:
        return [f"the manifest of call {call} ({path}) has no sweep step {exp}"]
    gone = next((u for u in step.get("unreached") or [] if u.get("config_key") == key), None)
    if gone:
        return [f"the manifest of call {call} ({path}) says its configuration was not reached "
                f"({gone.get('label')}: {gone.get('reason')})"]
    if "configs" in step:
        return [] if key in step["configs"] else [
            f"the manifest of call {call} ({path}) does not list its configuration {key} among the rows it made"]
    end, start = utc_s(man.get("utc")), None
    if end is not None and isinstance(man.get("seconds"), (int, float)):
        start = end - man["seconds"] - 1  # the env is taken in the call's first step (utc to the second)
    t = utc_s(env.get("utc"))
    if env.get("git_sha") != man.get("git_sha") or t is None or start is None or not start <= t <= end:
        return [f"not made by call {call} ({path}): its tree {env.get('git_sha')} and env utc {env.get('utc')} are "
                f"not that call's ({man.get('git_sha')}, {man.get('utc')} less {man.get('seconds')} s)"]
    return []


def belongs(r, cfg, env):
    """A row made where its configuration says: on its backend, and a measured GPU row on a GPU."""
    p = []
    # (a `cli` configuration runs megatrain as a user would, without --backend: its row says "auto")
    if cfg.get("backend") and not cfg.get("cli") and r.get("backend") != cfg["backend"]:
        p.append(f"backend {r.get('backend')!r}, but its configuration runs on {cfg['backend']!r}")
    if cfg.get("mode") == "measured" and cfg.get("backend") == "cuda" and not env.get("gpu_name"):
        p.append("a measured CUDA row whose env names no GPU (gpu_name null): not made on a GPU machine")
    return p


def other_gpu(old_rows, new_rows):
    """Rows the filing would replace with one measured on another GPU: (config_key, old, new)."""
    gpu = lambda r: (r.get("env") or {}).get("gpu_name")  # noqa: E731
    old = {r.get("config_key"): r for r in old_rows if r.get("mode") == "measured" and gpu(r)}
    return [(r.get("config_key"), gpu(old[r.get("config_key")]), gpu(r)) for r in new_rows
            if r.get("config_key") in old and gpu(r) and gpu(r) != gpu(old[r.get("config_key")])]


def merge(old_rows, new_rows, sweep):
    """The experiment's file after filing: the sweep's configurations in its order, each the
    newest row; rows of configurations no longer in the sweep dropped."""
    if sweep is None:  # unswept: replace rows of the same identity, keep the rest
        ident = lambda r: json.dumps([r.get(k) for k in ("system", "model", "batch", "seq_len", "precision",  # noqa
                                                           "layers_run", "variant", "mode")] +
                                     [(r.get("env") or {}).get("gpu_name")])
        d = {ident(r): r for r in old_rows}
        d.update({ident(r): r for r in new_rows})
        return list(d.values()), 0
    overrides = {sweeps.row_override(r) for r in new_rows}
    if len(overrides) > 1:
        die(f"{sweep['experiment']}: rows from runs with different --hardware overrides ({sorted(map(str, overrides))})")
    order = [sweeps.config_key(c) for c in sweeps.expand(sweeps.with_hardware(sweep, overrides.pop()))]
    d = {r.get("config_key"): r for r in old_rows if r.get("config_key") in order}
    d.update({r["config_key"]: r for r in new_rows})
    return [d[k] for k in order if k in d], len(old_rows) - len([r for r in old_rows if r.get("config_key") in order])


def side_file_ok(path, allow_dirty):
    """env_*.json / microbench_*.json: parses, and its env block says a clean tree."""
    try:
        with open(path) as f:
            d = resultslib.schema.loads(f.read())  # strictly: no NaN or Infinity
    except (OSError, ValueError) as e:
        return f"not JSON ({e})"
    if not isinstance(d, dict):
        return "not a JSON object"
    env = d.get("context", {}).get("mt_env") if "context" in d else d
    if isinstance(env, str):
        try:
            env = resultslib.schema.loads(env)
        except ValueError:
            env = None
    if not isinstance(env, dict):
        return "no env block"
    if env.get("git_dirty") is not False and not allow_dirty:
        return f"made from a dirty or unknown tree (git_dirty {env.get('git_dirty')})"
    return None


def source_and_dest(src_root, dest_root, rel, what):
    """(src_root/rel, dest_root/rel), each checked inside its root (safepath); PathError if not."""
    return (safepath.inside(src_root, rel, f"{what} in {src_root}:"),
            safepath.inside(dest_root, rel, f"{what} in {dest_root}:"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="directory a run wrote its results to")
    ap.add_argument("--results", default=os.path.join(REPO, "results"))
    ap.add_argument("--allow-dirty", action="store_true", help="file rows made from a dirty or unknown tree")
    ap.add_argument("--unswept", action="store_true", help="file rows of experiments no sweep file names")
    ap.add_argument("--sweeps", help="directory of the sweep files (default experiments/sweeps)")
    ap.add_argument("--dry-run", action="store_true", help="check and report; write nothing")
    ap.add_argument("--replace-gpu", action="store_true",
                    help="let rows measured on one GPU replace rows of the same configuration from another")
    ap.add_argument("--manifest", action="append", default=[],
                    help="the manifest of the campaign call that made the rows (PART-manifest.json; repeatable)")
    args = ap.parse_args()
    if args.sweeps:
        sweeps.set_dir(args.sweeps)
    if not os.path.isdir(args.dir):
        die(f"{args.dir}: not a directory")
    try:  # DIR is read, --results written: neither the same folder nor one inside the other (--dry-run writes nothing)
        if not args.dry_run:
            safepath.refuse_own_input(args.results, [args.dir], "--results", out_is_dir=True)
    except safepath.PathError as e:
        die(f"{e}: the filing would write over its input; HINT: file from the folder a run wrote elsewhere")
    table = sweeps.by_experiment()
    for m in args.manifest:
        if not os.path.isfile(m):
            die(f"--manifest {m}: no such file")
    manifests = load_manifests(args.manifest + sorted(glob.glob(os.path.join(args.dir, "*-manifest.json"))) +
                               sorted(glob.glob(os.path.join(args.results, "campaign", "*-manifest.json"))))
    filed = {}  # experiment -> its filed rows as text: a row already filed as it is needs no binding
    incoming, problems, unbound_n = {}, [], 0
    copies = []  # (source, dest), checked before anything is written
    for path in sorted(glob.glob(os.path.join(args.dir, "*.jsonl"))):
        if os.path.basename(path) in common.SIDE_FILES:  # not results rows (common.SIDE_FILES)
            continue
        for n, r in enumerate(common.load_jsonl(path), 1):
            rp = row_problems(r, args.allow_dirty, args.unswept, table)
            problems += [f"{path}:{n}: {p}" for p in rp]
            if rp:
                continue
            try:
                dest = safepath.inside(args.results, r["experiment"] + ".jsonl", "its results file")
                unbound = binding_problems(r, manifests)
                if unbound:
                    exp = r["experiment"]
                    if exp not in filed:
                        filed[exp] = {json.dumps(x, sort_keys=True) for x in common.load_jsonl(dest)}
                    if json.dumps(r, sort_keys=True) not in filed[exp]:
                        problems += [f"{path}:{n}: {p}" for p in unbound]
                        unbound_n += 1
                incoming.setdefault(r["experiment"], []).append(r)
                if r.get("trace"):
                    src, tdest = source_and_dest(args.dir, args.results, r["trace"], "its trace")
                    if not os.path.isfile(src):
                        problems.append(f"{path}:{n}: its trace {r['trace']} is not in {args.dir}")
                    copies.append((src, tdest))
            except safepath.PathError as e:
                problems.append(f"{path}:{n}: {e}")
    side = sorted(glob.glob(os.path.join(args.dir, "env_*.json")) +
                  glob.glob(os.path.join(args.dir, "microbench_*.json")))
    for path in side:
        try:
            src, dest = source_and_dest(args.dir, args.results, safepath.name(os.path.basename(path), "side file"),
                                        "side file")
        except safepath.PathError as e:
            problems.append(f"{path}: {e}")
            continue
        why = side_file_ok(src, args.allow_dirty)
        if why:
            problems.append(f"{path}: {why}")
        copies.append((src, dest))
    if problems:
        for p in problems:
            print(f"file_rows: {p}", file=sys.stderr)
        print(f"file_rows: {len(problems)} problem(s); nothing filed", file=sys.stderr)
        return 2 if unbound_n else 1
    if not incoming and not side:
        die(f"{args.dir}: no *.jsonl, env_*.json or microbench_*.json to file")
    dest_of = {exp: safepath.inside(args.results, exp + ".jsonl") for exp in incoming}
    clash = [(exp, k, a, b) for exp, new in sorted(incoming.items())
             for k, a, b in other_gpu(common.load_rows(dest_of[exp]), new)]
    if clash and not args.replace_gpu:
        for exp, k, a, b in clash:
            print(f"file_rows: {exp}: config {k}: would replace the row measured on {a} with one from {b}",
                  file=sys.stderr)
        print(f"file_rows: {len(clash)} row(s) measured on another GPU would replace filed ones; nothing filed. "
              f"HINT: --replace-gpu files them anyway (the older GPU's rows of those configurations are then gone)",
              file=sys.stderr)
        return 1
    os.makedirs(args.results, exist_ok=True)
    merged = {}
    for exp, new in sorted(incoming.items()):
        rows, dropped = merge(common.load_rows(dest_of[exp]), new, table.get(exp))
        merged[exp] = rows
        print(f"file_rows: {exp}: {len(new)} row(s) -> {dest_of[exp]} ({len(rows)} in the file"
              + (f"; {dropped} of entries no longer in the sweep dropped" if dropped else "") + ")", file=sys.stderr)
    for path in side:
        print(f"file_rows: {os.path.basename(path)} -> {args.results}/", file=sys.stderr)
    if args.dry_run:
        return 0
    try:
        for src, dest in copies:  # traces and side files, each checked inside results above, and again here
            safepath.copy_into(src, args.results, os.path.relpath(dest, args.results), "destination")
        for exp, rows in merged.items():
            safepath.inside(args.results, exp + ".jsonl")  # again, just before the write
            common.write_jsonl(dest_of[exp], rows)
    except safepath.PathError as e:
        die(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
