"""main.py: the GPU campaign's commands (ci/gpu_campaign.sh calls these; see its header).

    main.py list [--detail]                 the parts in priority order with their estimates
    main.py run PART [--dry-run] --out DIR [--only STEP,...] [--budget SECONDS]
    main.py check DIR                       the layout of a part's folder and its rows
    main.py file DIR... [--allow-dirty] [--replace-gpu] [--dry-run]
    main.py regenerate
    main.py tree-check TREE                 the carried tree against the bundle's `git ls-files -s`
    main.py next --out DIR [--budget S] [--gpu NAME] [--plan-only]
                                            the highest-priority parts not yet filed for this GPU, or
                                            filed but lacking rows from it (those configurations only),
                                            that fit S seconds (at most 2: 8 files), each in DIR/PART
Python 3 standard library only (the GPU machine has python3, no jq).
"""
import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time

from . import estimate, filing, pack, parts, runner

REPO = runner.REPO
# What one lent session leaves the parts: 15 min of device time in all (docs/REFERENCE.md#the-lent-gpu-machine),
# less 2 for the calls' idle waits and transfers (each part's estimate already holds its start).
SESSION_S = 13 * 60


def bin_dir():
    return os.path.abspath(os.environ.get("MT_BIN") or os.path.join(REPO, "build", "bin"))


def cmd_list(args):
    try:
        P = estimate.Planner(bin_dir())
    except FileNotFoundError as e:
        print(f"gpu_campaign: {e}", file=sys.stderr)
        return 1
    sessions = [[]]  # the parts in order, a new lent session when the next would not fit
    total = 0.0
    for p in parts.PARTS:
        t, rows = estimate.part(P, p)
        over = t - estimate.START_S - estimate.PACK_S > p.get("budget_s", runner.PART_BUDGET_S)
        print(f"{p['name']}  {estimate.minutes(t)} min  {p['what']}"
              + ("  [over a part's 9 minutes: the steps past its budget are skipped]" if over else ""))
        m = estimate.minutes(t) * 60  # grouped by the minutes printed, so the groups add up as shown
        if total + m > SESSION_S and sessions[-1]:
            sessions.append([])
            total = 0.0
        sessions[-1].append(p["name"])
        total += m
        if args.detail:
            for name, s, basis in rows:
                print(f"     {name:28s} {s:7.0f} s  {basis}")
    print(f"# estimates (GPU minutes incl. the machine's start): "
          f"sweeps from their configurations' expect_s (wall times measured on the H200 lease) or from "
          f"`megatrain plan --hardware {estimate.HARDWARE}` step times x steps + setup at "
          f"{estimate.SETUP_NS_PER_PARAM_CORE} ns/param/core over {estimate.GPU_CORES} cores (measured on the dev VM), "
          f"cut at the part's budget; other steps as measured on the leases, else allowances; start "
          f"{estimate.START_S} s (measured). "
          f"Lent 15-minute sessions ({SESSION_S // 60} min of parts each): "
          f"{'; '.join(', '.join(x) for x in sessions)}. `--list --detail` shows each step.",
          file=sys.stderr)
    return 0


def summary_text(ctx, check_problems):
    out = [f"part {ctx.part['name']}{' (dry run)' if ctx.dry else ''}: {'PASS' if runner.passed(ctx) else 'FAIL'} "
           f"in {time.time() - ctx.t0:.0f} s"]
    out += ["  " + l for l in ctx.prelude]
    for r in ctx.results:
        out.append(f"  {r['name']:24s} {r['status']:8s} {r['seconds']:6.1f} s / {r['timeout_s']} s"
                   + (f"  {r['note']}" if r.get("note") else ""))
        for u in r.get("unreached") or []:  # the sweep's configurations it did not run, and why
            out.append(f"    not reached: {u['label']}: {u['reason']}")
    for f in sorted(os.listdir(ctx.path("rows"))):
        if f.endswith(".jsonl"):
            out.append(f"rows {f}:")
            out += ["  " + l for l in pack.row_lines(ctx.path("rows", f))]
        if f.startswith("microbench_"):
            out += [f"{f}: " + l for l in pack.copy_rates(ctx.path("rows", f))]
    out += [f"check: {p}" for p in check_problems]
    return "\n".join(out) + "\n"


def cmd_run(args):
    p = parts.by_name(args.part)
    if p is None:
        print(f"gpu_campaign: no part '{args.part}' (parts: {', '.join(x['name'] for x in parts.PARTS)})", file=sys.stderr)
        return 2
    only = set(args.only.split(",")) if args.only else None
    if only and not only <= {s["name"] for s in p["steps"]}:
        print(f"gpu_campaign: --only {args.only}: part {p['name']} has steps "
              f"{', '.join(s['name'] for s in p['steps'])}", file=sys.stderr)
        return 2
    t0 = env_epoch("MT_CAMPAIGN_T0")  # read before anything in --out is touched
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    stale = [f for f in os.listdir(out) if f.startswith(p["name"] + "-")]
    for f in stale:  # a re-run into the same folder replaces the part's files
        os.remove(os.path.join(out, f))
    ctx = runner.Ctx(p, args.dry_run, out, bin_dir(), only, t0, args.budget)
    ctx.sweep_keys = getattr(args, "keys", None) or {}
    problems = []
    try:
        runner.run_part(ctx)
        man = {"schema": "megatrain.gpu_campaign/1", "part": p["name"], "call_id": ctx.call_id, "tag": ctx.tag,
               "dry_run": ctx.dry,
               "what": p["what"], "gpu_name": ctx.gpu_name, "git_sha": os.environ.get("MT_GIT_SHA"),
               "git_dirty": os.environ.get("MT_GIT_DIRTY"), "tree_check": os.environ.get("MT_TREE_CHECK"),
               "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(time.time() - t0, 1),
               "budget_s": ctx.budget_s, "steps": ctx.results}
        if ctx.sweep_keys:  # a completion: these configurations of these sweeps, the rest filed before
            man["completion"] = ctx.sweep_keys
        text = summary_text(ctx, [])
        pack.pack(ctx, text, man)
        tmp = tempfile.mkdtemp(prefix="mt-check-")
        try:
            problems = pack.check(out, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if problems:  # said in the summary too, so that it comes back with the files
            man["check"] = problems
            pack.pack(ctx, summary_text(ctx, problems), man)
        text = summary_text(ctx, problems)
    finally:
        shutil.rmtree(ctx.work, ignore_errors=True)
    runner.say("== summary\n" + text.rstrip())
    files = sorted(os.listdir(out))
    runner.say(f"pack: {len(files)} file(s), {sum(os.path.getsize(os.path.join(out, f)) for f in files) / 2**20:.2f} "
               f"MiB in {out}: {', '.join(files)}")
    ok = runner.passed(ctx) and not problems
    runner.say(f"result: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


NEXT_MAX_PARTS = 2  # each part packs 4 files; the device tool brings back 8


def env_epoch(name):
    """$NAME as epoch seconds (a finite number > 0), now when unset; a value it cannot read is
    an error naming the variable (RowsError: exit 2), never a silent default."""
    v = os.environ.get(name)
    if v is None or v == "":
        return time.time()
    try:
        t = float(v)
    except ValueError:
        t = float("nan")
    if not (math.isfinite(t) and t > 0):
        raise runner.resultslib.RowsError(f"${name} is {v!r}, not epoch seconds (a finite number > 0)")
    return t


def filed_parts(slug, campaign_dir=None):
    """Parts with a manifest filed in results/campaign/ for this kind of GPU (any date)."""
    d = campaign_dir or os.path.join(REPO, "results", "campaign")
    done = set()
    for f in os.listdir(d) if os.path.isdir(d) else ():
        if f.startswith(slug + "-") and f.endswith("-manifest.json"):
            # strictly: a filed manifest that cannot be read stops the plan (exit 2, naming it)
            # rather than the part silently counting as never run
            man = runner.resultslib.load_json(os.path.join(d, f))
            if not man.get("dry_run"):
                done.add(man.get("part"))
    return done


# Steps a part's completion runs again whatever they did before: they set the machine up.
SETUP_KINDS = ("machine", "peers")


def filed_keys(experiment, slug, results_dir=None):
    """Config keys of the experiment with a filed row made on this kind of GPU and no error."""
    # strict JSON objects (only config_key, error and env.gpu_name are read here)
    rows = runner.resultslib.load_jsonl(os.path.join(results_dir or os.path.join(REPO, "results"),
                                                     runner.resultslib.safepath.name(experiment, "experiment") + ".jsonl"))
    return {r.get("config_key") for r in rows
            if not r.get("error") and runner.gpu_slug((r.get("env") or {}).get("gpu_name")) == slug}


def filed_bench_names(part, slug, results_dir=None):
    """The benchmark names of the part's filed microbench from this kind of GPU (results/
    microbench_<slug>-<part>.json, as runner.py names it and file_rows.py files it); None when
    there is no such file (nothing to compare: the part is judged by its sweeps' rows alone)."""
    path = os.path.join(results_dir or os.path.join(REPO, "results"), f"microbench_{slug}-{part}.json")
    if not os.path.exists(path):
        return None
    bs = runner.resultslib.load_json(path).get("benchmarks", [])  # strictly (exit 2 naming it)
    if not (isinstance(bs, list) and all(isinstance(b, dict) and isinstance(b.get("name", ""), str) for b in bs)):
        raise runner.resultslib.RowsError(f"{path}: benchmarks is not a list of {{name, ...}} objects")
    return [b.get("name", "") for b in bs]


def completion(p, slug, results_dir=None):
    """What a filed part still lacks on this kind of GPU: {sweep step: [config keys]}, the
    configurations of its sweeps without a filed row from this GPU kind (never reached, an
    error row, or another GPU's), each list led by the sweep's first configuration (when it
    is not missing itself) so that the new rows have a same-run reference; and {microbench
    step: [families]}, the benchmark families the step now runs that its filed run lacks (the
    step runs again whole, its calibration with it); {} when none."""
    out = {}
    for st in p["steps"]:
        if st["kind"] == "microbench" and st.get("families"):
            names = filed_bench_names(p["name"], slug, results_dir)
            lacking = [f for f in st["families"] if names is not None and not any(n.startswith(f + "/") for n in names)]
            if lacking:
                out[st["name"]] = lacking
        if st["kind"] != "sweep":
            continue
        s = estimate.sweeps.load(os.path.join(REPO, st["sweep"]))
        own = parts.step_keys(st, estimate.expand_keys)  # a part running part of its sweep: that part
        cs = [k for k in (estimate.sweeps.config_key(c) for c in estimate.sweeps.expand(s)) if own is None or k in own]
        have = filed_keys(s["experiment"], slug, results_dir)
        missing = [k for k in cs if k not in have]
        if missing:
            out[st["name"]] = ([cs[0]] if cs[0] not in missing else []) + missing
    return out


def completion_part(p, keys):
    """The part as its completion runs it: the setup steps and the sweeps with missing rows,
    with a whole part's budget (a part's own smaller budget leaves room for the others of a
    session; a completion is what `next` chose to run)."""
    steps = [dict(st, keys=keys[st["name"]]) if st["name"] in keys and st["kind"] == "sweep" else st
             for st in p["steps"] if st["kind"] in SETUP_KINDS or st["name"] in keys]
    return dict(p, steps=steps, budget_s=runner.PART_BUDGET_S)


def plan_next(P, slug, budget_s, campaign_dir=None, results_dir=None):
    """[(part, estimated seconds of its steps, completion keys or None)], in priority order:
    parts not yet filed for this GPU, and filed parts whose sweeps lack rows from it (run
    again for those configurations only), as many as fit the budget (the machine's start is
    not in it: the call is already running)."""
    done, chosen, left = filed_parts(slug, campaign_dir), [], budget_s
    for p in parts.PARTS:
        if len(chosen) == NEXT_MAX_PARTS:
            break
        keys = completion(p, slug, results_dir) if p["name"] in done else None
        if p["name"] in done and not keys:
            continue
        t = estimate.part(P, completion_part(p, keys) if keys else p)[0] - estimate.START_S
        if p.get("alone") and chosen:  # it shares its lease with its partner part, not with these
            continue
        if t <= left:
            chosen.append((p, t, keys))
            left -= t
            if p.get("alone"):  # the lease's other call is its partner's (C2a, then C2b)
                break
    return chosen


def describe_choice(p, t, keys):
    if not keys:
        return f"{p['name']} (~{t:.0f} s)"
    bench = {st["name"] for st in p["steps"] if st["kind"] == "microbench"}
    sw = sorted(k for k in keys if k not in bench)
    parts_ = [f"{sum(len(keys[k]) for k in sw)} configuration(s) of {', '.join(sw)}"] if sw else []
    parts_ += [f"{k} again (its filed run lacks {', '.join(keys[k])})" for k in sorted(keys) if k in bench]
    return f"{p['name']} (~{t:.0f} s, completing it: {'; '.join(parts_)})"


def cmd_next(args):
    name = args.gpu or ("dry run (no GPU)" if args.dry_run else None)
    if not name:
        try:
            import subprocess
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=30).stdout.strip().splitlines()
            name = out[0].strip() if out else None
        except (OSError, subprocess.SubprocessError):
            name = None
    if not name:
        print("gpu_campaign: next: no GPU found (nvidia-smi); HINT: --gpu NAME to plan for one", file=sys.stderr)
        return 2
    try:
        P = estimate.Planner(bin_dir())
    except FileNotFoundError as e:
        print(f"gpu_campaign: {e}", file=sys.stderr)
        return 1
    slug = runner.gpu_slug(name)
    done = filed_parts(slug, args.campaign_dir)
    chosen = plan_next(P, slug, args.budget, args.campaign_dir, args.results_dir)
    print(f"gpu_campaign: next for {name} ({slug}): filed already: {', '.join(sorted(done)) or 'none'}; "
          f"within {args.budget} s: " + (", ".join(describe_choice(*c) for c in chosen) or "nothing fits"),
          file=sys.stderr)
    if args.plan_only or not chosen:
        return 0 if chosen or args.plan_only else 1
    rc, t_end = 0, time.time() + args.budget
    for p, _, keys in chosen:
        left = int(t_end - time.time())
        if left < 60:
            print(f"gpu_campaign: next: {left} s left, part {p['name']} not started", file=sys.stderr)
            rc = 1
            break
        os.environ["MT_CAMPAIGN_T0"] = str(time.time())
        only = ",".join(st["name"] for st in completion_part(p, keys)["steps"]) if keys else None
        ns = argparse.Namespace(part=p["name"], dry_run=args.dry_run, out=os.path.join(args.out, p["name"]), only=only,
                                keys=keys, budget=min(runner.PART_BUDGET_S, left))
        rc |= cmd_run(ns)
    return rc


def cmd_check(args):
    tmp = tempfile.mkdtemp(prefix="mt-check-")
    try:
        problems = pack.check(args.dir, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for p in problems:
        print(f"gpu_campaign: check: {p}", file=sys.stderr)
    if problems:
        return 1
    man = runner.resultslib.load_json([os.path.join(args.dir, f) for f in os.listdir(args.dir) if f.endswith("-manifest.json")][0])
    print(json.dumps({"part": man["part"], "dry_run": man["dry_run"], "files": man["files"],
                      "steps": {s["name"]: s["status"] for s in man["steps"]}}))
    return 0


def git_blob_sha1(path):
    import hashlib
    data = open(path, "rb").read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def cmd_tree_check(args):
    """The carried tree against the bundle's commit (TREE: `git ls-files -s` when it was
    built): prints the number of tracked files that differ or are missing, and some names."""
    diff = []
    for line in open(args.tree):
        meta, path = line.rstrip("\n").split("\t", 1)
        mode, sha = meta.split()[:2]
        if mode == "160000":  # a submodule: no blob to compare
            continue
        full = os.path.join(REPO, path)
        if os.path.islink(full):
            continue
        if not os.path.isfile(full) or git_blob_sha1(full) != sha:
            diff.append(path)
    print(f"{len(diff)}" + (f" file(s) differ from the bundle's commit: {', '.join(diff[:5])}"
                            + ("..." if len(diff) > 5 else "") if diff else ""))
    return 0


def main():
    ap = argparse.ArgumentParser(prog="gpu_campaign", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("list")
    a.add_argument("--detail", action="store_true")
    a = sub.add_parser("run")
    a.add_argument("part")
    a.add_argument("--dry-run", action="store_true")
    a.add_argument("--out", required=True)
    a.add_argument("--only")
    a.add_argument("--budget", type=int, help="seconds for the steps (at most runner.PART_BUDGET_S)")
    a = sub.add_parser("check")
    a.add_argument("dir")
    a = sub.add_parser("file")
    a.add_argument("dirs", nargs="+")
    a.add_argument("--allow-dirty", action="store_true")
    a.add_argument("--replace-gpu", action="store_true",
                   help="rows measured on this GPU replace filed rows of the same configuration from another")
    a.add_argument("--dry-run", action="store_true")
    sub.add_parser("regenerate")
    a = sub.add_parser("tree-check")
    a.add_argument("tree")
    a = sub.add_parser("next")
    a.add_argument("--out", default=os.environ.get("OUT") or os.path.join(REPO, "gpu_campaign_out", "next"))
    a.add_argument("--budget", type=int, default=540, help="seconds for the parts' steps and packing (default 540)")
    a.add_argument("--gpu", help="plan for this GPU name instead of nvidia-smi's")
    a.add_argument("--plan-only", action="store_true")
    a.add_argument("--dry-run", action="store_true", help="the chosen parts as CPU dry runs")
    a.add_argument("--campaign-dir", help=argparse.SUPPRESS)  # tests: another results/campaign
    a.add_argument("--results-dir", help=argparse.SUPPRESS)  # tests: another results/ (the filed rows)
    args = ap.parse_args()
    if args.cmd == "next":
        return cmd_next(args)
    if args.cmd == "tree-check":
        return cmd_tree_check(args)
    if args.cmd == "list":
        return cmd_list(args)
    if args.cmd == "run":
        return cmd_run(args)
    if args.cmd == "check":
        return cmd_check(args)
    if args.cmd == "file":
        return filing.file_dirs(args.dirs, args.allow_dirty, args.dry_run, args.replace_gpu)
    return filing.regenerate(bin_dir())


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ValueError as e:  # a bad results row (resultslib.RowsError) or a name that is not one (safepath)
        if not isinstance(e, (runner.resultslib.RowsError, runner.resultslib.safepath.PathError)):
            raise
        print(f"gpu_campaign: {e}", file=sys.stderr)
        sys.exit(2)
