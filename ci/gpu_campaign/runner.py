"""runner.py: runs one part of the GPU campaign, step by step, inside its time budget.

Each step runs in its own process group with its own limit: min(the step's timeout, the
time left in the part less what packing needs). A step that overruns is stopped
(SIGTERM to its group, SIGKILL 20 s later) and the part goes on; a step that no longer
fits is skipped with a line saying so. Output goes to WORK/logs/NN-step.log; the one-line
status of each step and a short summary go to stdout (the end of stdout is what the
device tool returns). On the CPU (--dry-run) the same steps run on the cpu backend at
tiny sizes; what needs a GPU, torch or DeepSpeed is skipped with one line.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from harness import resultslib  # the GPU's profile: gpu.name_match in experiments/hardware/

from . import dryrun, estimate, pack, parts

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PART_BUDGET_S = 510   # the steps' share of a part: under 9 minutes with the pack and margin
PACK_RESERVE_S = 25   # kept back for packing ($OUT) and the summary
MIN_STEP_S = 15       # a step with less time than this left is skipped, not started
KILL_GRACE_S = 20     # SIGTERM -> SIGKILL (megatrain finishes its step in flight on SIGTERM)


class Ctx:
    def __init__(self, part, dry, out, bin_dir, only=None, t0=None, budget_s=None):
        self.part, self.dry, self.out, self.bin, self.only = part, dry, out, bin_dir, only
        # the part's own budget (parts.py budget_s), or --budget (at most PART_BUDGET_S): less
        # when the lent session has less left, more when it has more
        self.budget_s = min(PART_BUDGET_S, budget_s) if budget_s else part.get("budget_s", PART_BUDGET_S)
        self.skip_peers = {}   # peer -> why its configurations are not run (peers_setup says)
        self.sweep_keys = {}   # sweep step -> the config keys it runs (next's completion of a part), else all
        self.step_extra = {}   # what a step adds to its result (the setup's timings, configurations not reached)
        self.t0 = t0 or time.time()
        # the call's id: every row it makes carries it (MT_CAMPAIGN_CALL, one_config.blank_row) and
        # its manifest names it, so filing takes a row only with the manifest of the call that made it
        self.call_id = f"{part['name']}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(self.t0))}-{os.urandom(3).hex()}"
        self.work = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"mt_campaign_{part['name']}_{os.getpid()}")
        for d in ("rows", "profile", "labs", "logs", "sweeps"):
            os.makedirs(os.path.join(self.work, d), exist_ok=True)
        # OUT: where a step's own tools put their files (the official peer writes its train.py log
        # to $OUT): the part's logs, packed, never the device tool's $OUT, which holds 8 files at most
        self.env = dict(os.environ, MT_BIN=bin_dir, PYTHONUNBUFFERED="1", OUT=os.path.join(self.work, "logs"),
                        MT_CAMPAIGN_CALL=self.call_id)
        self.gpu_name = None
        self.tag = "dryrun-" + part["name"] if dry else None
        self.results = []   # one dict per step: name, kind, status, rc, seconds, timeout_s, note
        self.prelude = []   # gpu_campaign.sh's lines before the part (where CUDA's libraries came from)
        self.n = 0

    def path(self, *p):
        return os.path.join(self.work, *p)

    def left(self):
        return self.budget_s - (time.time() - self.t0)


def gpu_slug(name):
    """The tag a part's files carry for a GPU kind (h200-B-...); `next` reads them back by it."""
    # GH200 first: its name contains "H200". Case-blind: a user types `--next-plan h200`.
    n = (name or "").upper()
    for kind in ("GH200", "H200", "H100"):
        if kind in n:
            return kind.lower()
    return "gpu"


def say(msg):
    print(msg, flush=True)


def run_proc(ctx, argv, log, timeout, env=None, stdout=None):
    """Runs argv in its own process group; returns (rc or None on timeout, seconds)."""
    t = time.time()
    with open(log, "ab") as lf:
        lf.write(("$ " + " ".join(argv) + "\n").encode())
        lf.flush()
        out = open(stdout, "wb") if stdout else lf
        try:
            p = subprocess.Popen(argv, stdout=out, stderr=lf, cwd=REPO, env=env or ctx.env, start_new_session=True)
        except OSError as e:
            lf.write(f"cannot run {argv[0]}: {e}\n".encode())
            return 127, time.time() - t
        finally:
            if stdout:
                out.close()
        try:
            rc = p.wait(timeout=max(1, timeout))
        except subprocess.TimeoutExpired:
            for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 10)):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            lf.write(f"\n[campaign] stopped after its limit of {timeout:.0f} s\n".encode())
            return None, time.time() - t
    return rc, time.time() - t


def tail(path, n=3):
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip()]
    except OSError:
        return []
    return [l[:200] for l in lines[-n:]]


def classify(ctx, rc, gpu_needed=True):
    if rc is None:
        return "timeout"
    if rc == 0:
        return "ok"
    if rc == 77:  # a GPU test with no device: expected on the CPU, a failure on the GPU machine
        return "skipped" if ctx.dry or not gpu_needed else "failed"
    return "failed"


# ---------------------------------------------------------------- the kinds of step
def step_machine(ctx, st, log, timeout):
    for argv, name in ((["nvidia-smi"], "nvidia-smi.txt"), (["free", "-g"], "free.txt")):
        p = ctx.path("logs", name)
        rc, _ = run_proc(ctx, argv, log, min(timeout, 30), stdout=p)
        say(f"--- {' '.join(argv)}" + ("" if rc == 0 else f" (exit {rc})"))
        for l in open(p, errors="replace").read().splitlines()[:40]:
            say(l)
    if not ctx.dry:
        q = ctx.path("logs", "gpu_name.txt")
        run_proc(ctx, ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], log, 30, stdout=q)
        names = [l.strip() for l in open(q, errors="replace") if l.strip()]
        ctx.gpu_name = names[0] if names else None
    ctx.tag = f"{'dryrun' if ctx.dry else gpu_slug(ctx.gpu_name)}-{ctx.part['name']}"
    ver = ctx.path("logs", "version.json")
    rc1, _ = run_proc(ctx, [os.path.join(ctx.bin, "megatrain"), "--version"], log, 30, stdout=ver)
    say("megatrain " + " ".join(tail(ver, 1)))
    envf = ctx.path("rows", f"env_{ctx.tag}.json")
    rc2, _ = run_proc(ctx, [os.path.join(ctx.bin, "mt-env")], log, 60, stdout=envf)
    try:
        e = resultslib.load_json(envf)  # strictly: a NaN, a list or a repeated key is a failed step
        say(f"env: gpu {e.get('gpu_name')}, driver {e.get('driver')}, cuda {e.get('cuda')}, host "
            f"{(e.get('host_mem_bytes') or 0) / 2**30:.0f} GiB, {e.get('cpu_cores')} cores, git {e.get('git_sha')}"
            f"{' (dirty)' if e.get('git_dirty') else ''}")
    except (OSError, ValueError):
        rc2 = rc2 or 1
    return ("ok" if rc1 == 0 and rc2 == 0 else "failed"), None


def step_test(ctx, st, log, timeout):
    env = dict(ctx.env, **(st.get("dry_env") if ctx.dry and "dry_env" in st else st.get("env", {})))
    rc, _ = run_proc(ctx, [os.path.join(ctx.bin, st["argv"][0])] + st["argv"][1:], log, timeout, env=env)
    return classify(ctx, rc), ("no CUDA device (exit 77)" if rc == 77 else None)


def profile_base(ctx):
    """The profile the part calibrates: its GPU's (gpu.name_match), else the one marked "*"."""
    return resultslib.profile_of_gpu(ctx.gpu_name, fallback=True)


def step_microbench(ctx, st, log, timeout):
    filt = parts.DRY_MICROBENCH_FILTER if ctx.dry else st["filter"]
    mt = 0.01 if ctx.dry else st["min_time"]
    dest = ctx.path("rows", f"microbench_{ctx.tag}.json")
    rc, dt = run_proc(ctx, [os.path.join(ctx.bin, "mt-microbench"), f"--benchmark_filter={filt}",
                            f"--benchmark_min_time={mt}"], log, timeout, stdout=dest + ".tmp")
    if rc != 0:
        return classify(ctx, rc), None
    os.replace(dest + ".tmp", dest)
    for l in pack.copy_rates(dest):
        say("  " + l)
    if st.get("calibrate"):
        base = profile_base(ctx)
        rc, _ = run_proc(ctx, [sys.executable, "-m", "harness.calibrate_profile", f"experiments/hardware/{base}.json",
                               dest, "--out", ctx.path("profile", base + ".json")], log, max(10, timeout - dt))
        if rc != 0:
            return classify(ctx, rc), "calibrate_profile.py failed"
        say(f"  calibrated profile: {base}.json (harness/calibrate_profile.py; the table is in the log)")
    return "ok", None


def step_sweep(ctx, st, log, timeout):
    path, note = st["sweep"], None
    keys = ctx.sweep_keys.get(st["name"])
    if keys:
        say(f"  completing the part: {len(keys)} configuration(s) of {st['sweep']}")
    else:
        keys = parts.step_keys(st, estimate.expand_keys)  # the step's share of its sweep (`where`)
        if keys:
            say(f"  {len(keys)} configuration(s) of {st['sweep']} (where {json.dumps(st['where'])})")
    if ctx.dry:
        path, dropped = dryrun.tiny_sweep_file(os.path.join(REPO, st["sweep"]), ctx.path("sweeps"), keys)
        if dropped:
            note = ("peers skipped in the dry run (they need torch, DeepSpeed and a CUDA device): "
                    + ", ".join(dropped))
            say("  " + note)
    # the sweep itself stops before a configuration that no longer fits (its expect_s), a few
    # seconds before this step's limit, so that it ends cleanly with what it has
    argv = [sys.executable, "-m", "harness.sweep.run", "--out-dir", ctx.path("rows"), "--bin", ctx.bin,
            "--deadline", f"{time.time() + timeout - 5:.0f}"]
    for peer, why in sorted(ctx.skip_peers.items()):
        argv += ["--skip-peer", f"{peer}={why}"]
    if keys and not ctx.dry:
        argv += ["--keys", ",".join(keys)]
    rc, _ = run_proc(ctx, argv + [path], log, timeout)
    exp = resultslib.safepath.name(resultslib.load_json(path).get("experiment"), "the sweep's experiment")
    for l in pack.row_lines(ctx.path("rows", exp + ".jsonl")):
        say("  " + l)
    # the configurations this call made rows of: the manifest lists them, filing checks a row against them
    ctx.step_extra["configs"] = [r.get("config_key") for r in pack.common.load_jsonl(ctx.path("rows", exp + ".jsonl"))
                                 if r.get("campaign_call") == ctx.call_id]
    status = classify(ctx, rc)
    if status == "failed" and rc == 1:
        note = (note + "; " if note else "") + "some configurations failed (rows with an 'error' field)"
    unreached = []
    uf = ctx.path("rows", exp + ".unreached.json")
    if os.path.exists(uf):  # run.py's list of {label, reason}: read strictly, never half-believed
        try:
            unreached = resultslib.load_json(uf, list)
            if not all(isinstance(u, dict) and isinstance(u.get("label"), str) and isinstance(u.get("reason"), str)
                       for u in unreached):
                raise resultslib.RowsError(f"{uf}: not a list of {{label, reason}}")
        except resultslib.RowsError as e:
            unreached = []
            note = (note + "; " if note else "") + f"the list of configurations not reached is unreadable: {e}"
    if unreached:
        ctx.step_extra["unreached"] = unreached
        for u in unreached:
            say(f"  not reached: {u['label']}: {u['reason']}")
        note = (note + "; " if note else "") + f"{len(unreached)} configuration(s) not reached (listed below)"
    return status, note


def have_module(ctx, code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, env=ctx.env, timeout=120).returncode == 0


def step_peers(ctx, st, log, timeout):
    """Installs the carried wheels (.whl/, baselines/peers/fetch_wheels.sh) unless DeepSpeed
    imports already; then, side by side (neither measures anything), builds DeepSpeed's CPU
    Adam op once (the first peer would build it inside its own time limit) and runs the
    official code's prepare (`official`: its extension, its model), each timed. A peer whose
    setup failed or was skipped is not run by the sweep after it (ctx.skip_peers, with why)."""
    off = st.get("official")
    if ctx.dry:
        missing = [m for m in ("torch", "deepspeed") if not have_module(ctx, f"import {m}")]
        why = (" and ".join(missing) + " not importable") if missing else "no CUDA device in a dry run"
        for peer in ("deepspeed_zero3", "fsdp2_offload", "megatrain_official"):
            ctx.skip_peers[peer] = "not run in a dry run"
        return "skipped", (f"peers: skipped ({why}); on the GPU machine this installs .whl/, builds cpu_adam"
                           + (" and prepares the official code" if off else ""))
    t_end, times, status, notes = time.time() + timeout, {}, "ok", []
    t = time.time()
    installed = True
    if not have_module(ctx, "import deepspeed"):
        status, why = install_wheels(ctx, log, t_end)
        installed = status == "ok"
        if not installed:  # the official code's prepare still runs
            ctx.skip_peers["deepspeed_zero3"] = "not installed in peers_setup: " + why
            notes.append(why)
    times["pip_s"] = round(time.time() - t, 1)
    # DeepSpeed JIT-builds cpu_adam with ninja: the one beside this python must be on PATH
    r = subprocess.run([sys.executable, "-c", "import ninja; print(ninja.BIN_DIR)"], capture_output=True, text=True,
                       env=ctx.env)
    if r.returncode == 0 and r.stdout.strip():
        ctx.env["PATH"] = r.stdout.strip() + ":" + ctx.env.get("PATH", "")
    jobs = {}
    if installed:
        jobs["cpu_adam"] = ([sys.executable, "-c", "import deepspeed; from deepspeed.ops.op_builder import "
                             "CPUAdamBuilder; CPUAdamBuilder().load(); print('cpu_adam built, deepspeed', "
                             "deepspeed.__version__)"], log, max(10, t_end - time.time()))
    off_why = None
    if off:
        if not os.path.isfile(os.path.join(REPO, off["script"])):
            off_why = f"skipped: {off['script']} is not in this tree"
        else:
            module = off["script"][:-len(".py")].replace("/", ".")  # run as a module, from REPO
            jobs["official_prepare"] = ([sys.executable, "-m", module, "--prepare-only", "--config", off["config"],
                                         "--layers", str(off["layers"]), "--seed", str(off.get("seed", 1))],
                                        log.replace(".log", "-official.log"),
                                        min(off["timeout_s"], max(10, t_end - time.time())))
    rcs = run_side_by_side(ctx, jobs)
    for name, (rc, dt) in rcs.items():
        times[name + "_s"] = round(dt, 1)
    ctx.step_extra["timings"] = times
    notes.insert(0, "; ".join(f"{k} {v:.1f} s" for k, v in times.items()))
    if "cpu_adam" in rcs:
        rc, _ = rcs["cpu_adam"]
        status = classify(ctx, rc)
        if rc != 0:
            ctx.skip_peers["deepspeed_zero3"] = "its CPU Adam op did not build in peers_setup"
            notes.append("DeepSpeed's CPU Adam op did not build: its configurations are not run")
    if "official_prepare" in rcs:
        orc, _ = rcs["official_prepare"]
        if orc == 77:
            off_why = "skipped: " + (" ".join(tail(jobs["official_prepare"][1], 1)) or "exit 77")
        elif orc != 0:
            off_why = "its prepare " + ("timed out" if orc is None else f"failed (exit {orc})")
            status = "failed" if status == "ok" else status
            for l in tail(jobs["official_prepare"][1], 3):
                say("    | " + l)
    if off_why:
        ctx.skip_peers["megatrain_official"] = off_why
        notes.append("official code: " + off_why)
    return status, ", ".join(notes)


def install_wheels(ctx, log, t_end):
    """pip install of .whl/ (wheels, and DeepSpeed's sdist when no wheel of it was built) into
    /tmp/peers_site, put on PYTHONPATH. Returns (status, why)."""
    whl = os.path.join(REPO, ".whl")
    wheels = sorted(os.path.join(whl, f) for f in os.listdir(whl) if f.endswith(".whl")) if os.path.isdir(whl) else []
    sdists = sorted(os.path.join(whl, f) for f in os.listdir(whl) if f.startswith("deepspeed-") and
                    f.endswith(".tar.gz")) if os.path.isdir(whl) else []
    if not wheels and not sdists:
        return "failed", "deepspeed not importable and no .whl/ carried (bash baselines/peers/fetch_wheels.sh here)"
    site = "/tmp/peers_site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-cache-dir", "--upgrade",
           "--target", site]
    if wheels:
        rc, _ = run_proc(ctx, pip + ["--no-compile"] + wheels, log, max(10, t_end - time.time()))
        if rc != 0:
            return classify(ctx, rc), "pip install of .whl/*.whl failed"
    if sdists and not any(os.path.basename(w).startswith("deepspeed-") for w in wheels):
        env = dict(ctx.env, DS_BUILD_OPS="0")
        rc, _ = run_proc(ctx, pip + ["--no-build-isolation", sdists[0]], log, max(10, t_end - time.time()), env=env)
        if rc != 0:
            return classify(ctx, rc), "building deepspeed from its sdist failed"
    ctx.env["PYTHONPATH"] = site + (":" + ctx.env["PYTHONPATH"] if ctx.env.get("PYTHONPATH") else "")
    return "ok", None


def run_side_by_side(ctx, jobs):
    """jobs: {name: (argv, log, timeout)} run at once, each in its own process group and log;
    returns {name: (rc or None on timeout, seconds)}."""
    out, threads = {}, []
    for name, (argv, lg, to) in jobs.items():
        th = threading.Thread(target=lambda n=name, a=argv, l=lg, t=to: out.__setitem__(n, run_proc(ctx, a, l, t)))
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    return out


def step_cpu_adam(ctx, st, log, timeout):
    """Our AdamW and DeepSpeedCPUAdam in the same (mixed) layout, ours paper beside, each with the
    host's memory bound, at every core (baselines/peers/cpu_optimizers.py --layouts), after
    peers_setup built the op. A dry run without torch or DeepSpeed runs ours and the bound alone
    (--no-peers), so that CI runs the step's layouts."""
    no_peers = ctx.dry and not (have_module(ctx, "import torch") and have_module(ctx, "import deepspeed"))
    keep = ctx.path("labs", f"{ctx.tag}-{st['keep']}")
    argv = [sys.executable, "-m", "baselines.peers.cpu_optimizers", "--layouts", "--repeats", "3", "--min-time", "0.3",
            "--bin", ctx.bin, "--out", keep]
    if ctx.dry:
        argv += ["--n", str(1 << 20), "--repeats", "1", "--min-time", "0.05"] + ["--no-peers"] * no_peers
    rc, _ = run_proc(ctx, argv, log, timeout, stdout=ctx.path("logs", "cpu_adam.stdout"))
    for l in tail(log, 4):
        say("  " + l)
    if rc != 0:
        return classify(ctx, rc), "cpu_optimizers.py did not finish (the log says why)"
    try:  # the figures into the summary: params/s, GB/s and the share of the bound each, ours over DeepSpeed
        rows = {r["impl"]: r for r in resultslib.load_jsonl(keep)}  # strict: no NaN ratio in the summary
        o, p = rows["megatrain_adamw_mixed"], rows["megatrain_adamw_paper"]
        d = rows.get("deepspeed_cpu_adam_mixed")
        f = lambda r: (f"{r['params_per_s'] / 1e6:.0f} M params/s ({r['bytes_per_s'] / 1e9:.1f} GB/s at "  # noqa: E731
                       f"{r['bytes_per_param']} B, {100 * r['frac_of_bound']:.0f}% of the bound)")
        head = (f"mixed: ours/DeepSpeed {o['ratio_to_deepspeed']:.2f}x" if d else
                "torch or deepspeed not importable: ours and the bound only (--no-peers)")
        return "ok", (f"{head} at {o['threads']} threads, n {o['n_params']} ({o['n_over_llc']:.1f}x the LLC "
                      f"mixed): ours mixed {f(o)}" + (f", DeepSpeed mixed {f(d)}" if d else "")
                      + f"; ours paper {f(p)}; triad {o['triad_gb_s']:.1f} GB/s at 32 B/element")
    except (OSError, ValueError, KeyError, TypeError) as e:
        return "failed", f"cpu_adam rows unreadable: {type(e).__name__}: {e}"


def step_lab(ctx, st, log, timeout):
    exe = os.path.join(ctx.bin, "lab", st["argv"][0])
    if ctx.dry:
        there = os.access(exe, os.X_OK)
        return ("skipped" if there else "failed"), (f"needs a CUDA device; {exe} is there" if there else f"{exe} missing")
    rc, _ = run_proc(ctx, [exe] + st["argv"][1:], log, timeout, stdout=ctx.path("labs", f"{ctx.tag}-{st['keep']}"))
    for l in tail(ctx.path("labs", f"{ctx.tag}-{st['keep']}"), 4):
        say("  " + l)
    return classify(ctx, rc), None


def step_labs(ctx, st, log, timeout):
    exes = [os.path.join(ctx.bin, "lab", n) for n in st["labs"]]
    missing = [e for e in exes if not os.access(e, os.X_OK)]
    if ctx.dry or missing:
        return ("failed" if missing else "skipped"), (f"missing: {', '.join(missing)}" if missing else
                                                      f"need a CUDA device; the {len(exes)} labs are there")
    keep, t_end, status = ctx.path("labs", f"{ctx.tag}-{st['keep']}"), time.time() + timeout, "ok"
    for e in exes:
        part = keep + ".part"
        rc, _ = run_proc(ctx, [e], log, max(5, t_end - time.time()), stdout=part)
        with open(keep, "ab") as k, open(part, "rb") as f:
            k.write(f"== {os.path.basename(e)} (exit {rc})\n".encode() + f.read())
        os.remove(part)
        if classify(ctx, rc) != "ok":
            status = classify(ctx, rc)
            say(f"  lab {os.path.basename(e)}: {status}")
    return status, None


def step_torch(ctx, st, log, timeout):
    if ctx.dry and not have_module(ctx, "import torch; assert torch.cuda.is_available()"):
        why = "torch not importable" if not have_module(ctx, "import torch") else "no CUDA device"
        return "skipped", f"{why} ({st['argv'][0]} runs on the GPU machine)"
    keep = ctx.path("labs", f"{ctx.tag}-{st['keep']}")
    rc, _ = run_proc(ctx, [sys.executable] + st["argv"], log, timeout, stdout=keep)
    for l in tail(keep, 4):
        say("  " + l)
    return classify(ctx, rc), None


def step_attention_profile(ctx, st, log, timeout):
    """The attention tables (gpu.attention_tflops.<kernel>) of this GPU's profile from the rows
    the lab and torch steps kept: the simulator and the planner then price each implementation
    (ours, PyTorch's SDPA for the peers) at what it measured here."""
    rows = [ctx.path("labs", f"{ctx.tag}-{k}") for k in st["rows"]]
    rows = [r for r in rows if os.path.exists(r) and os.path.getsize(r) > 0]
    if not rows:
        return "skipped", ("no attention rows (the attention lab and torch_reference.py need a CUDA device)"
                           if ctx.dry else "no attention rows: the lab and torch steps kept none")
    base = profile_base(ctx)
    out = ctx.path("profile", base + ".json")
    base_file = out if os.path.exists(out) else f"experiments/hardware/{base}.json"  # after this part's own microbench
    # calibrate_profile.py never writes over its input: a new file beside the logs, renamed over out
    new = ctx.path("logs", f"{base}.attention.json")
    argv = [sys.executable, "-m", "harness.calibrate_profile", base_file, "--env", ctx.path("rows", f"env_{ctx.tag}.json"),
            "--out", new]
    for r in rows:
        argv += ["--attention", r]
    rc, _ = run_proc(ctx, argv, log, timeout)
    if rc != 0:
        return classify(ctx, rc), "calibrate_profile.py --attention failed (the log says why)"
    os.replace(new, out)
    tables = resultslib.field(resultslib.load_json(out), "gpu.attention_tflops")
    if not isinstance(tables, dict):
        return "failed", f"{out}: no gpu.attention_tflops object after calibrate_profile.py --attention"
    say(f"  attention tables in {base}.json: " + ", ".join(sorted(tables)))
    return "ok", None


def step_sanitizer(ctx, st, log, timeout):
    san = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if ctx.dry:
        return "skipped", "compute-sanitizer needs a GPU" + ("" if os.access(san, os.X_OK) else " (and is not installed here)")
    if not os.access(san, os.X_OK):
        return "failed", "compute-sanitizer not found"
    # --no-deliberate-errors: without the checks that provoke CUDA API errors on purpose (the 1 PiB
    # cudaMalloc of the out-of-memory check), so whatever the tool reports is real
    rc, _ = run_proc(ctx, [san, "--tool", st["tool"], "--error-exitcode", "99",
                           os.path.join(ctx.bin, "test_backend_ops"), "--backend", "cuda", "--no-deliberate-errors"], log, timeout)
    if rc != 0 and any("Device not supported" in l for l in tail(log, 50)):
        # gVisor machines refuse the tool (docs/REFERENCE.md#the-lent-gpu-machine: "Device not supported", error 999)
        return "skipped", "compute-sanitizer does not support this machine's runtime (gVisor?): run part G on another"
    return classify(ctx, rc), ("the sanitizer reported errors (exit 99)" if rc == 99 else None)


KINDS = {"machine": step_machine, "test": step_test, "microbench": step_microbench, "sweep": step_sweep,
         "peers": step_peers, "cpu_adam": step_cpu_adam, "lab": step_lab, "labs": step_labs, "torch": step_torch, "sanitizer": step_sanitizer,
         "attention_profile": step_attention_profile}


# ---------------------------------------------------------------- the part
def run_part(ctx):
    part = ctx.part
    say(f"== part {part['name']}{' (dry run on the CPU)' if ctx.dry else ''}: {part['what']}")
    pre = os.environ.get("MT_CAMPAIGN_PRELUDE")  # gpu_campaign.sh's lines before the part: CUDA libraries, bundle
    if pre and os.path.isfile(pre):
        shutil.copyfile(pre, ctx.path("logs", "00-prelude.log"))
        ctx.prelude = tail(pre, 20)
    steps = [s for s in part["steps"] if not ctx.only or s["kind"] == "machine" or s["name"] in ctx.only]
    for i, st in enumerate(steps, 1):
        log = ctx.path("logs", f"{i:02d}-{st['name']}.log")
        left = ctx.left() - PACK_RESERVE_S
        timeout = min(st["timeout_s"], left)
        t = time.time()
        if timeout < MIN_STEP_S:
            status, note, dt = "skipped", f"no time left in the part ({left:.0f} s)", 0.0
        else:
            ctx.step_extra = {}
            try:
                status, note = KINDS[st["kind"]](ctx, st, log, timeout)
            except (OSError, ValueError, subprocess.SubprocessError) as e:
                status, note = "failed", f"{type(e).__name__}: {e}"
            dt = time.time() - t
        ctx.results.append(dict({"name": st["name"], "kind": st["kind"], "status": status, "seconds": round(dt, 1),
                                 "timeout_s": round(timeout), "note": note}, **ctx.step_extra))
        ctx.step_extra = {}
        say(f"[{part['name']} {i}/{len(steps)}] {st['name']}: {status} ({dt:.1f} s of {timeout:.0f})"
            + (f" - {note}" if note else ""))
        if status in ("failed", "timeout") and os.path.exists(log):
            for l in tail(log, 3):
                say("    | " + l)
    return ctx.results


def passed(ctx):
    """A GPU part passes when every step is ok; a dry run when none failed or overran."""
    bad = ("failed", "timeout") if ctx.dry else ("failed", "timeout", "skipped")
    return not any(r["status"] in bad for r in ctx.results)
