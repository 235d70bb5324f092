#!/usr/bin/env python3
"""The official MegaTrain code (DLYuanGod/MegaTrain at the commit official_prepare.sh
pins) as a peer that runs itself, on the GPU machine, with the sweep's CLI:

    python3 -m baselines.peers.megatrain_official --config CFG --batch B --seq-len T \
        --warmup W --steps S --seed N --precision P --experiment E [--layers L] \
        [--data FILE|synthetic] [--checkpoint-interval 4] [--optimizer deepspeed|torch] \
        [--out FILE] [--timeout 3000]
    python3 -m baselines.peers.megatrain_official --prepare-only --config CFG [--layers L] [--seed N]
    python3 -m baselines.peers.megatrain_official --cpu-rehearsal --config CFG --batch B --seq-len T [--layers L]

It needs .official/ (official_prepare.sh, run where git and PyPI answer; carried to the
GPU machine) and, for the paper's optimizer, DeepSpeed's wheel in .whl/ (fetch_wheels.sh).
Then, each step cached under the work folder ($MT_OFFICIAL_WORK, default
/tmp/megatrain_official) and timed into the row's official.setup_s:

  wheels      .whl/*.whl and .official/wheels/*.whl installed into WORK/site (one per
              package; .official's wins), put on the official code's PYTHONPATH only;
  cpu_adam    DeepSpeed's CPU Adam op JIT-built, in torch's default extension cache (or
              $TORCH_EXTENSIONS_DIR): deepspeed_zero3.py's build of it is reused.
              The official code's own CUDA extensions (infinity/cuda_pipeline, csrc/) are
              not built: examples/sft/train.py imports neither;
  model       CFG cut to --layers, transformers' random init after manual_seed(--seed), as
              the other peers build it (the values differ with the device and dtype of the
              init; a step's time does not), saved in HF layout (safetensors, bf16) with a
              word-level tokenizer whose word "t<i>" is id i (official_files.py): train.py
              loads both with from_pretrained;
  data        the llm.c windows of --data (or the synthetic draw) every peer trains on, one
              sample per row of T ids, warmup+steps batches of B (official_files.py);
  load        train.py's own start (imports, from_pretrained, its pinned flats) until
              "Starting training...".

then runs examples/sft/train.py (through official_launch.py) with a YAML
(official_files.train_yaml: our B, T, steps = warmup+steps, AdamW lr 3e-4, betas 0.9/0.95,
eps 1e-8, wd 0.1, clip 1.0, --checkpoint-interval, --attn: flash_attention_2 where the
flash-attn package imports, else sdpa, whose 2-D padding mask official_launch.py turns into
plain causal attention: the official single-GPU path works with flash_attention_2 only),
reads its log (official_parse.py), drops the warm-up steps and
prints our results row (the last stdout line; extra key "official": per-phase medians,
setup times, the log's own TFLOPS, commit). The full log: $OUT/official_<utc>.log when
$OUT is set (the device tool), else WORK/runs/<utc>/train.log.

--cpu-rehearsal (no GPU): the same wheels, environment, model, data and YAML, then
official_launch.py runs official_rehearse.py in train.py's place: the official config loader,
tokenizer, ChatDataset, collate_fn and DataLoader, and one forward and backward of the first
batch through the official layer loop with its 2-D mask, on the CPU (official_rehearse.py says
what it checks). Prints one JSON line (no `schema`: never a row) with attention_impl (what ran
here) and attention_impl_gpu (what a GPU run with these imports would ask for); exit 1 when a
check fails, 77 when torch, .official or datasets' own needs are missing here.

Exit: 0 a row; 77 skipped (.official/ or torch absent); 1 one line saying what failed.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

from . import common, official_files, official_parse
from .common import PeerError, log

HERE = os.path.dirname(os.path.abspath(__file__))

PROG = "megatrain_official"
ROOT = common.ROOT


def parse_args(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    common.add_common_args(ap)
    for act in ap._actions:  # batch/seq-len: not needed by --prepare-only; precision: see below
        if act.dest in ("batch", "seq_len"):
            act.required = False
        if act.dest == "precision":
            act.choices, act.default = None, "paper"
            act.help = "accepted for the sweep's CLI; the row says what the official code keeps"
    ap.add_argument("--checkpoint-interval", type=int, default=4,
                    help="layers per activation checkpoint (the official configs' 4)")
    ap.add_argument("--optimizer", choices=["deepspeed", "torch"], default="deepspeed",
                    help="deepspeed: DeepSpeedCPUAdam, fp32 moments (the paper's); torch: torch AdamW")
    ap.add_argument("--num-workers", type=int, default=1, help="train.py's DataLoader workers")
    ap.add_argument("--attn", choices=["auto", "flash_attention_2", "sdpa"], default="auto",
                    help="auto: flash_attention_2 where flash-attn imports, else sdpa through "
                         "official_launch.py's 2-D mask wrapper")
    ap.add_argument("--timeout", type=int, default=3000, help="seconds for train.py")
    ap.add_argument("--prepare-only", action="store_true",
                    help="install wheels, build cpu_adam, write the model; no training")
    ap.add_argument("--official", default=os.environ.get("MT_OFFICIAL_DIR", os.path.join(ROOT, ".official")))
    ap.add_argument("--work", default=os.environ.get("MT_OFFICIAL_WORK", "/tmp/megatrain_official"))
    ap.add_argument("--cpu-rehearsal", action="store_true",
                    help="no GPU: the official data path and one step of its layer loop on the CPU")
    ap.add_argument("--write-model", default=None, help=argparse.SUPPRESS)  # internal: the model child
    return ap.parse_args(argv)


# ------------------------------------------------------------------ setup steps

def check_official(d: str) -> str:
    """The pinned commit of the laid-out code; skipped (77) when there is none."""
    try:
        with open(os.path.join(d, "COMMIT")) as f:
            commit = f.read().strip()
    except OSError:
        common.skip(PROG, "%s absent: run baselines/peers/official_prepare.sh and carry .official" % d)
    if not os.path.isfile(os.path.join(d, "src", "examples", "sft", "train.py")):
        common.skip(PROG, "%s/src/examples/sft/train.py absent: re-run official_prepare.sh" % d)
    return commit


def _dist_name(wheel: str) -> str:
    return re.sub(r"[-_.]+", "_", os.path.basename(wheel).split("-")[0]).lower()


def _fits_here(wheel: str) -> bool:
    """Whether pip would install the wheel on this interpreter (its tags against packaging's
    list; true where packaging is absent): a wheel built for another Python (the GPU image's
    multiprocess is py312) is left out here rather than failing the whole install."""
    try:
        from packaging.tags import sys_tags
        from packaging.utils import parse_wheel_filename
    except ImportError:
        return True
    try:
        tags = parse_wheel_filename(os.path.basename(wheel))[3]
    except ValueError:
        return True
    here = set(sys_tags())
    return any(t in here for t in tags)


def install_wheels(official: str, work: str) -> tuple:
    """(site or None, seconds): .whl/ and .official/wheels/ into WORK/site, once per set."""
    picked, sdists = {}, {}
    for d in (os.path.join(ROOT, ".whl"), os.path.join(official, "wheels")):  # later wins
        if os.path.isdir(d):
            for n in sorted(os.listdir(d)):
                if n.endswith(".whl") and _fits_here(os.path.join(d, n)):
                    picked[_dist_name(n)] = os.path.join(d, n)
                elif n.startswith("deepspeed-") and n.endswith(".tar.gz"):
                    sdists["deepspeed"] = os.path.join(d, n)  # fetch_wheels.sh's fallback
    sdists = {k: v for k, v in sdists.items() if k not in picked}
    if not picked and not sdists:
        return None, 0.0
    site = os.path.join(work, "site")
    stamp = "\n".join(sorted(os.path.basename(p) for p in list(picked.values()) + list(sdists.values())))
    marker = os.path.join(site, ".megatrain_official")
    if os.path.exists(marker):
        with open(marker) as f:
            if f.read() == stamp:
                return site, 0.0
    t0 = time.perf_counter()
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-cache-dir",
           "--upgrade", "--target", site]
    # the sdist builds against the image's torch and setuptools, ops left to JIT (DS_BUILD_OPS=0)
    for cmd in ([pip + ["--no-compile"] + sorted(picked.values())] if picked else []) + \
               [pip + ["--no-build-isolation", s] for s in sdists.values()]:
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, DS_BUILD_OPS="0"))
        if r.returncode != 0:
            raise PeerError("pip install of the carried wheels failed: %s"
                            % (r.stderr.strip().splitlines() or ["?"])[-1])
    with open(marker, "w") as f:
        f.write(stamp)
    return site, time.perf_counter() - t0


def child_env(official: str, work: str, site) -> dict:
    """The official code's environment: its tree and the wheels first on PYTHONPATH,
    every Hugging Face library offline, its caches under WORK (torch's extension cache
    left where the deepspeed_zero3 peer builds the same cpu_adam)."""
    env = dict(os.environ)
    paths = [os.path.join(official, "src")] + ([site] if site else [])
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env.update(PYTHONPATH=os.pathsep.join(paths), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", HF_HOME=os.path.join(work, "hf"),
               TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    return env


PROBE = """
import importlib, json
out = {}
for m in ("infinity", "datasets", "deepspeed", "flash_attn", "psutil", "accelerate"):
    try:
        importlib.import_module(m); out[m] = None
    except Exception as e:
        out[m] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
print(json.dumps(out))
"""


def probe(env: dict, optimizer: str) -> dict:
    """What train.py imports, tried in its environment, so a missing package is one line
    now rather than a traceback after the model load. {module: None or the error}."""
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    try:
        got = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise PeerError("import probe failed: %s" % (r.stderr.strip().splitlines() or ["?"])[-1])
    if got["infinity"]:
        raise PeerError("the official package does not import: %s" % got["infinity"])
    if got["datasets"]:
        raise PeerError("datasets (train.py's data loader) does not import: %s; "
                        "run official_prepare.sh and carry .official" % got["datasets"])
    if got["psutil"]:
        raise PeerError("psutil (train.py imports it) does not import: %s" % got["psutil"])
    if got["accelerate"]:  # transformers 5.23 wants it for train.py's from_pretrained(device_map="cpu")
        log("%s: accelerate does not import (%s): train.py's from_pretrained(device_map=...) may refuse"
            % (PROG, got["accelerate"]))
    if optimizer == "deepspeed" and got["deepspeed"]:
        raise PeerError("deepspeed does not import (%s): run fetch_wheels.sh and carry .whl, "
                        "or --optimizer torch" % got["deepspeed"])
    return got


def build_cpu_adam(env: dict) -> float:
    """DeepSpeed's CPU Adam op, JIT-built (or loaded from TORCH_EXTENSIONS_DIR)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", "from deepspeed.ops.op_builder import CPUAdamBuilder; "
                        "CPUAdamBuilder().load()"], capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        tail = [l for l in r.stderr.strip().splitlines() if l.strip()] or ["?"]
        raise PeerError("cannot build DeepSpeed's CPU Adam op: %s (or --optimizer torch)" % tail[-1][:300])
    return time.perf_counter() - t0


def _key(*parts) -> str:
    return hashlib.sha1("\0".join(str(p) for p in parts).encode()).hexdigest()[:10]


def ensure_model(a, spec, work: str) -> tuple:
    """(model dir, seconds, cached): CFG cut to --layers, random init (--seed), in HF
    layout with our word-level tokenizer; written by a child process so this one
    never holds a CUDA context while train.py runs."""
    with open(a.config if not os.path.isdir(a.config) else os.path.join(a.config, "config.json"), "rb") as f:
        cfg_hash = hashlib.sha1(f.read()).hexdigest()
    d = os.path.join(work, "models", "%s-L%d-s%d-%s" % (spec.name, spec.layers_run, a.seed,
                                                        _key(cfg_hash, spec.layers_run, a.seed)))
    if os.path.exists(os.path.join(d, "READY")):
        return d, 0.0, True
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "baselines.peers.megatrain_official", "--config", a.config, "--seed", str(a.seed),
           "--write-model", d] + (["--layers", str(a.layers)] if a.layers is not None else [])
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        tail = [l for l in r.stderr.strip().splitlines() if l.strip()] or ["?"]
        raise PeerError("writing the model failed: %s" % tail[-1])
    return d, time.perf_counter() - t0, False


def write_model(a, d: str) -> None:
    """The --write-model child: build (on the GPU when it fits, for speed), save, mark READY."""
    import shutil
    import torch
    spec = common.load_config(a.config, a.layers)
    n = common.count_params_meta(spec)
    dev = None
    if torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info()
        dev = "cuda" if 2 * n < 0.6 * free else None
    log("%s: writing %s (%d params, init on %s)" % (PROG, d, n, dev or "cpu"))
    model = common.build_model(spec, dtype=torch.bfloat16, seed=a.seed, device=dev)
    tmp = d + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, max_shard_size="5GB")
    official_files.write_files(tmp, official_files.tokenizer_files(spec.config.vocab_size))
    with open(os.path.join(tmp, "READY"), "w") as f:
        f.write("%d params\n" % n)
    shutil.rmtree(d, ignore_errors=True)
    os.replace(tmp, d)


def ensure_data(a, spec, work: str) -> tuple:
    """(data dir, seconds): warmup+steps llm.c windows as official_files samples."""
    n_batches = a.warmup + a.steps
    src = a.data if a.data in (None, "", "synthetic") else os.path.abspath(a.data)
    V = spec.config.vocab_size
    d = os.path.join(work, "data", _key(src, a.batch, a.seq_len, n_batches, a.seed, V,
                                         os.path.getmtime(src) if src not in (None, "", "synthetic") else 0))
    if os.path.exists(os.path.join(d, official_files.DATA_FILE)):
        return d, 0.0
    t0 = time.perf_counter()
    batches = common.TokenBatches(src, a.batch, a.seq_len, V, seed=a.seed)
    rows = []
    for _ in range(n_batches):
        w = batches.next_window()
        rows.extend(w[:-1].reshape(a.batch, a.seq_len).tolist())
    official_files.write_files(d, official_files.dataset_files(rows))
    return d, time.perf_counter() - t0


# ------------------------------------------------------------------ the run

def run_train(official: str, yaml_path: str, env: dict, timeout: int, logf: str) -> tuple:
    """(exit status, log text, seconds to "Starting training..." or None, wall seconds).
    The log goes to stderr and logf as it comes; on timeout the whole process group
    (train.py and its DataLoader workers) is killed."""
    # official_launch.py runs train.py as it is, with SDPA's 2-D mask handling when
    # MT_OFFICIAL_SDPA_2D=1 (its docstring says why the official code needs it without flash-attn)
    cmd = [sys.executable, os.path.join(HERE, "official_launch.py"), os.path.join("examples", "sft", "train.py"),
           "--config", yaml_path]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=os.path.join(official, "src"), env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    timed_out = []

    def kill():
        timed_out.append(True)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    timer = threading.Timer(timeout, kill)
    timer.start()
    lines, started_at = [], None
    with open(logf, "w") as lf:
        for line in p.stdout:
            lines.append(line)
            lf.write(line)
            lf.flush()
            sys.stderr.write(line)
            if started_at is None and official_parse.STARTED in line:
                started_at = time.perf_counter() - t0
    p.stdout.close()
    rc = p.wait()
    timer.cancel()
    if timed_out:
        rc = 124
    return rc, "".join(lines), started_at, time.perf_counter() - t0


def rehearse(a) -> int:
    """--cpu-rehearsal: everything a GPU run sets up, then official_rehearse.py through the
    launcher in train.py's place (this module's docstring)."""
    if a.batch is None or a.seq_len is None:
        raise PeerError("--cpu-rehearsal needs --batch and --seq-len")
    commit = check_official(a.official)
    try:
        import torch  # noqa: F401
    except ImportError:
        common.skip(PROG, "torch is not importable here")
    spec = common.load_config(a.config, a.layers)
    os.makedirs(a.work, exist_ok=True)
    site, _ = install_wheels(a.official, a.work)
    env = child_env(a.official, a.work, site)
    try:
        imports = probe(env, "torch")
    except PeerError as e:
        if "No module named" in str(e):  # datasets' own needs (pyarrow, ...): the GPU image has them
            common.skip(PROG, "the official code's imports are not all here (%s); HINT: PYTHONPATH a folder "
                        "holding them (pip install --target DIR pyarrow pandas xxhash multiprocess psutil "
                        "accelerate)" % e)
        raise
    if imports["accelerate"]:
        common.skip(PROG, "accelerate does not import (train.py's from_pretrained(device_map='cpu') needs it here)")
    gpu_attn = a.attn if a.attn != "auto" else ("flash_attention_2" if imports["flash_attn"] is None else "sdpa")
    attn = "sdpa"  # flash-attn has no CPU kernel: here the 2-D mask goes through official_launch.py's SDPA
    env.update(MT_OFFICIAL_SDPA_2D="1", MT_OFFICIAL_WORD_TOKENIZER="1")
    model_dir, _, _ = ensure_model(a, spec, a.work)
    data_dir, _ = ensure_data(a, spec, a.work)
    run_dir = os.path.join(a.work, "rehearsals", _key(model_dir, data_dir, a.batch, a.seq_len))
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(data_dir, official_files.DATA_FILE)) as f:  # the rows as written, as ids
        first = [[int(w[1:]) for w in s["instruction"].split()] for s in json.load(f)[:a.batch]]
    expect = os.path.join(run_dir, "expect.json")
    with open(expect, "w") as f:
        json.dump(first, f)
    yaml_path = os.path.join(run_dir, "train.yaml")
    with open(yaml_path, "w") as f:
        f.write(official_files.train_yaml(
            model_dir=model_dir, data_dir=data_dir, batch=a.batch, seq_len=a.seq_len, steps=1, seed=a.seed,
            lr=common.LR, weight_decay=common.WEIGHT_DECAY, beta1=common.BETA1, beta2=common.BETA2, eps=common.EPS,
            clip=common.GRAD_CLIP, checkpoint_interval=a.checkpoint_interval, num_workers=a.num_workers,
            optimizer="adamw", attn=attn))
    cmd = [sys.executable, os.path.join(HERE, "official_launch.py"), os.path.join(HERE, "official_rehearse.py"),
           "--config", yaml_path, "--expect", expect]
    r = subprocess.run(cmd, cwd=os.path.join(a.official, "src"), env=env, capture_output=True, text=True,
                       timeout=a.timeout)
    with open(os.path.join(run_dir, "rehearsal.log"), "w") as f:
        f.write(r.stdout + r.stderr)
    got = [json.loads(l) for l in r.stdout.splitlines() if l.startswith('{"rehearsal"')]
    if not got:
        tail = [l for l in (r.stderr + r.stdout).splitlines() if l.strip()] or ["no output"]
        raise PeerError("the rehearsal exited %d before its checks: %s (log %s)"
                        % (r.returncode, tail[-1].strip()[:300], os.path.join(run_dir, "rehearsal.log")))
    out = dict(got[-1], rehearsal=PROG, commit=commit, attention_impl_gpu=gpu_attn, model_dir=model_dir)
    print(json.dumps(out), flush=True)
    bad = [k for k, ok in out["checks"].items() if not ok]
    if bad or r.returncode != 0:
        raise PeerError("the rehearsal's checks failed: %s (log %s)"
                        % (", ".join(bad) or "exit %d" % r.returncode, os.path.join(run_dir, "rehearsal.log")))
    return 0


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.write_model:
        write_model(a, a.write_model)
        return 0
    if a.cpu_rehearsal:
        return rehearse(a)
    if not a.prepare_only:
        if a.batch is None or a.seq_len is None:
            raise PeerError("--batch and --seq-len are required (unless --prepare-only)")
        common.check_common_args(a)
    if a.checkpoint_interval < 1:
        raise PeerError("--checkpoint-interval must be >= 1")
    commit = check_official(a.official)
    try:
        import torch
    except ImportError:
        common.skip(PROG, "torch is not importable here")
    if not torch.cuda.is_available():
        raise PeerError("no CUDA device visible (the official code runs on CUDA only)")
    spec = common.load_config(a.config, a.layers)
    n_params = common.count_params_meta(spec)
    # bf16 weights 2 + bf16 gradients 2 + the pinned bf16 flats 2 + fp32 m, v 8 (docs/REFERENCE.md#the-official-code)
    common.check_host_budget(n_params, 14, "the official code")
    os.makedirs(a.work, exist_ok=True)
    setup = {}
    site, setup["wheels"] = install_wheels(a.official, a.work)
    env = child_env(a.official, a.work, site)
    imports = probe(env, a.optimizer)
    attn = a.attn if a.attn != "auto" else ("flash_attention_2" if imports["flash_attn"] is None else "sdpa")
    if attn == "flash_attention_2" and imports["flash_attn"]:
        raise PeerError("--attn flash_attention_2: flash_attn does not import (%s)" % imports["flash_attn"])
    env["MT_OFFICIAL_SDPA_2D"] = "1" if attn == "sdpa" else "0"
    env["MT_OFFICIAL_WORD_TOKENIZER"] = "1"  # our model dirs carry our word tokenizer (official_launch.py)
    setup["cpu_adam"] = build_cpu_adam(env) if a.optimizer == "deepspeed" else None
    model_dir, setup["model"], cached = ensure_model(a, spec, a.work)
    log("%s: commit %s, model %s (%s), setup so far %s" % (PROG, commit[:12], model_dir,
        "cached" if cached else "written", json.dumps({k: v and round(v, 1) for k, v in setup.items()})))
    if a.prepare_only:
        print(json.dumps({"prepare": PROG, "commit": commit, "model_dir": model_dir, "params": n_params,
                          "setup_s": setup}))
        return 0

    data_dir, setup["data"] = ensure_data(a, spec, a.work)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    run_dir = os.path.join(a.work, "runs", stamp)
    os.makedirs(run_dir, exist_ok=True)
    yaml_path = os.path.join(run_dir, "train.yaml")
    with open(yaml_path, "w") as f:
        f.write(official_files.train_yaml(
            model_dir=model_dir, data_dir=data_dir, batch=a.batch, seq_len=a.seq_len,
            steps=a.warmup + a.steps, seed=a.seed, lr=common.LR, weight_decay=common.WEIGHT_DECAY,
            beta1=common.BETA1, beta2=common.BETA2, eps=common.EPS, clip=common.GRAD_CLIP,
            checkpoint_interval=a.checkpoint_interval, num_workers=a.num_workers,
            optimizer="deepspeed_adam" if a.optimizer == "deepspeed" else "adamw", attn=attn))
    logf = os.path.join(os.environ["OUT"], "official_%s.log" % stamp) if os.environ.get("OUT") \
        else os.path.join(run_dir, "train.log")
    log("%s: running examples/sft/train.py --config %s (log %s)" % (PROG, yaml_path, logf))
    rc, text, started_at, wall = run_train(a.official, yaml_path, env, a.timeout, logf)
    if rc != 0:
        last = [l for l in text.splitlines() if l.strip()] or ["no output"]
        raise PeerError("train.py %s (last line: %s); log %s"
                        % ("timed out after %ds" % a.timeout if rc == 124 else "exited %d" % rc,
                           last[-1].strip()[:300], logf))
    parsed = official_parse.parse_log(text)
    got = official_parse.timed_summary(parsed, batch=a.batch, seq_len=a.seq_len, warmup=a.warmup)
    want = "deepspeed_cpu_adam" if a.optimizer == "deepspeed" else "torch_adamw"
    if parsed["optimizer"] != want:
        raise PeerError("train.py ran optimizer %s, not %s; log %s" % (parsed["optimizer"], want, logf))
    setup["load"] = started_at
    setup["train_py_wall"] = wall
    # what it keeps: bf16 weights and gradients; DeepSpeedCPUAdam's moments fp32 (paper),
    # torch AdamW's in the parameters' bf16
    precision = "paper" if want == "deepspeed_cpu_adam" else "bf16"
    if a.precision not in (None, precision):
        log("%s: --precision %s asked; the official code keeps %s (row says %s)" % (PROG, a.precision, precision, precision))
    system = PROG if a.optimizer == "deepspeed" else PROG + "_torchadam"
    row = common.make_row(
        experiment=a.experiment, system=system, model=spec.name, params=n_params,
        layers_run=spec.layers_run, layers_model=spec.layers_model, batch=a.batch, seq_len=a.seq_len,
        precision=precision, step_times_s=got["step_s"], peak_gpu=got["peak_gpu_bytes"],
        peak_host=got["peak_host_bytes"], env=common.collect_env())
    got["extra"]["attn_note"] = None if attn != "sdpa" else "2-D padding mask run as causal SDPA (official_launch.py)"
    # flash-attn where this machine's torch has it, SDPA otherwise: what train.py's log says it loaded
    row["attention_impl"] = parsed.get("attn") or attn
    row["official"] = dict(got["extra"], commit=commit, checkpoint_interval=a.checkpoint_interval,
                           num_workers=a.num_workers, data=a.data or "synthetic", log=logf,
                           setup_s={k: (round(v, 2) if isinstance(v, float) else v) for k, v in setup.items()})
    common.emit_row(a.out, row)
    ph = got["extra"]["phases_ms"]
    log("%s: median %.1f ms (fwd %s, bwd %s, rest %s ms), %.1f TFLOP/s ours, %s the log's"
        % (PROG, row["step_ms"]["median"], *["%.0f" % ph[k] if ph[k] is not None else "-"
           for k in ("forward", "backward", "optimizer_and_rest")], row["tflops"],
           got["extra"]["log_tflops_median"]))
    return 0


if __name__ == "__main__":
    common.main_guard(main, PROG)
