"""megatrain_cli.py: the sweep runs the megatrain CLI (harness/sweep/run.py): `megatrain
plan` and `megatrain train` on one configuration, their output read back, each under a
time limit (the configuration's, --timeout, cut at --deadline).
"""
import hashlib
import json
import os
import re
import subprocess
import time

from .common import REPO, die
from .. import resultslib  # schema.loads: strict JSON, no NaN or Infinity
from . import sweeps
from .sweeps import schedule_args

# Options `megatrain plan` does not take (train-only), with the number of values each
# takes; dropped from args for plan calls. Plan prices --attention (the profile's
# measured rate of that implementation) and --serial-optimizer (the update after
# backward, no speculative window) as train runs them; --grad-clip changes no price
# (the plan has no gradients: it assumes the speculative step's updates are kept).
PLAN_DROP_FLAGS = {"--grad-clip": 1}


# `train --batch auto`'s line on stderr (planner/batch_search.c mt_batch_search_why): the choice.
BATCH_AUTO = re.compile(r"--batch auto: batch (\d+), --recompute (\S+), --checkpoint-interval (\d+), "
                        r"--weight-buffers (\d+): ([^\n]*)")


def batch_auto_choice(stderr):
    """{batch, args, why} of a `train --batch auto` run from its stderr; RunError without the line."""
    m = BATCH_AUTO.search(stderr or "")
    if not m:
        raise RunError("train --batch auto printed no '--batch auto: batch N, --recompute P, ...' line "
                       "(a megatrain of another version?)")
    return {"batch": int(m.group(1)),
            "args": ["--recompute", m.group(2), "--checkpoint-interval", m.group(3), "--weight-buffers", m.group(4)],
            "why": m.group(0)}


# ---------------------------------------------------------------- running the CLI
class RunError(Exception):
    pass


def plan_args(args):
    """A configuration's extra arguments less those `megatrain plan` does not take."""
    out, skip = [], 0
    for a in args:
        if skip:
            skip -= 1
        elif a in PLAN_DROP_FLAGS:
            skip = PLAN_DROP_FLAGS[a]
        else:
            out.append(a)
    return out


class Unreached(Exception):
    """A configuration not run, cleanly: no time left, its peer absent or skipped (exit 77)."""


def run_cmd(cmd, timeout, want_stderr=False, env=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RunError(f"timed out after {timeout} s: {' '.join(cmd)}")
    except OSError as e:
        raise RunError(f"cannot run {cmd[0]}: {e}")
    if p.returncode != 0:
        last = [l for l in p.stderr.strip().splitlines() if l.strip()]
        if p.returncode == 77:  # CTest's skip: what the command needs is absent here (a peer's checkout)
            raise Unreached(f"skipped (exit 77): {last[-1] if last else '(no message)'}")
        raise RunError(f"exit {p.returncode}: {last[-1] if last else '(no message)'}")
    return (p.stdout, p.stderr) if want_stderr else p.stdout


class Runner:
    def __init__(self, bindir, tmpdir, timeout=None):
        self.mt = os.path.join(bindir, "megatrain")
        self.env_bin = os.path.join(bindir, "mt-env")
        self.tmp = tmpdir
        self.timeout = timeout
        self.deadline = None    # --deadline: no command runs past it
        self.last_stderr = ""  # the last train's stderr (its "ready in S s" line)
        self.env_cache = {}
        for b in (self.mt, self.env_bin):
            if not os.access(b, os.X_OK):
                die(f"{b}: not found or not executable; HINT: build first (make build) or pass --bin DIR / MT_BIN")

    def env(self, hardware):
        name = os.path.basename(str(hardware)).removesuffix(".json") if hardware else None
        if name not in self.env_cache:
            cmd = [self.env_bin] + (["--hardware-profile", name] if name else [])
            try:
                self.env_cache[name] = resultslib.schema.loads(run_cmd(cmd, 120))
            except (RunError, ValueError) as e:
                die(f"mt-env failed: {e}")
        return dict(self.env_cache[name])

    def model_config(self, c, layers):
        """Path of the config to run: the original, or a temp copy with overrides and depth."""
        src = os.path.join(REPO, c["model"]) if not os.path.isabs(c["model"]) else c["model"]
        with open(src) as f:
            cfg = json.load(f)
        cfg.update(c["overrides"] or {})
        layers_model = int(cfg["num_hidden_layers"])
        if not c["overrides"] and layers in (None, layers_model):
            return src, layers_model, layers_model
        cfg["num_hidden_layers"] = int(layers or layers_model)
        if "max_window_layers" in cfg:
            cfg["max_window_layers"] = min(int(cfg["max_window_layers"]), cfg["num_hidden_layers"])
        h = hashlib.sha1(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:12]
        path = os.path.join(self.tmp, f"config-{h}.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path, int(cfg["num_hidden_layers"]), layers_model

    def limit(self, c):
        """A command's time limit: the configuration's (or --timeout), cut at --deadline."""
        t = self.timeout or c["timeout_s"]
        if self.deadline is not None:
            t = min(t, max(1, int(self.deadline - time.time())))
        return t

    def plan(self, c, cfg_path, hardware=None):
        cmd = [self.mt, "plan", "--config", cfg_path, "--batch", str(c["batch"]), "--seq-len", str(c["seq_len"]),
               "--precision", c["precision"], *schedule_args(c), "--grad-accum", str(c["grad_accum"])]
        if c["batch"] == sweeps.AUTO and not hardware:  # plan --batch auto prices candidates on a profile:
            hardware = c["hardware"] or "measured"        # the one train picks on (batch_auto.c)
        if hardware:
            cmd += ["--hardware", str(hardware)]
        if c["host_mem_gb"]:
            cmd += ["--host-mem-gb", str(c["host_mem_gb"])]
        cmd += plan_args(c["args"])
        out = run_cmd(cmd, self.limit(c))
        try:
            return resultslib.schema.loads(out)
        except ValueError as e:
            raise RunError(f"plan printed no JSON object ({e}): {out[:200]!r}")

    def train(self, c, cfg_path, trace=None):
        if c["cli"] == "default":  # the no-argument run: embedded model, corpus and settings
            cmd = [self.mt]
        else:
            cmd = [self.mt, "train", "--config", cfg_path, "--init", "random", "--seed", str(c["seed"]),
                   "--data", "synthetic", "--batch", str(c["batch"]), "--seq-len", str(c["seq_len"]),
                   "--steps", str(c["steps"]), "--precision", c["precision"], *schedule_args(c),
                   "--grad-accum", str(c["grad_accum"]), "--backend", c["backend"]]
            if c["hardware"]:
                cmd += ["--hardware", str(c["hardware"])]
            if trace:
                cmd += ["--trace", trace]
            cmd += list(c["args"])
        out, self.last_stderr = run_cmd(cmd, self.limit(c), want_stderr=True)
        steps = []
        for line in out.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    d = resultslib.schema.loads(line)
                except ValueError as e:  # a NaN or Infinity figure is no timing
                    raise RunError(f"train printed a line that is not strict JSON ({e}): {line[:200]!r}")
                if "step" in d and "step_ms" in d:
                    steps.append(d)
        if len(steps) != c["steps"]:
            raise RunError(f"train printed {len(steps)} step lines, expected {c['steps']}")
        return steps
