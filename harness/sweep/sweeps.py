"""sweeps.py: a sweep file (experiments/sweeps/NAME.json, schema megatrain.sweep/1) and
the configurations it expands to. run.py runs them; file_rows.py, claims.py, export.py
and the results check use the same expansion to tell a current row (its key is one of
the sweep's configurations) from a stale one (its entry no longer exists).

Python 3 standard library only (the GPU machine has python3 but no jq or gnuplot).
"""
import copy
import glob
import hashlib
import itertools
import json
import os
import sys

from . import common
from .common import REPO, SWEEP_SCHEMA, die

SWEEP_DIR = os.path.join(REPO, "experiments", "sweeps")
MODES = ("measured", "extrapolated", "projected", "projected-plan")
# Fields that identify a configuration (the resumability key). steps/warmup/timeout
# (and an extrapolation's rounds and check depth: how it is measured) are not part of
# it: re-running with more steps needs --force.
KEY_FIELDS = ("model", "model_name", "overrides", "layers", "layers_fit", "layers_holdout", "batch", "seq_len",
              "precision", "schedule", "backend", "hardware", "mode", "args", "grad_accum",
              "host_mem_gb", "variant", "cli")
DEFAULTS = {"model": None, "model_name": None, "overrides": {}, "layers": None, "layers_fit": None,
            "layers_holdout": None, "batch": 1, "seq_len": 1024, "tokens_per_step": None, "precision": "paper",
            "schedule": "megatrain", "backend": "cpu", "hardware": None, "mode": "measured",
            "args": [], "grad_accum": 1, "host_mem_gb": None, "variant": None, "steps": 8,
            "warmup": 2, "timeout_s": 900, "seed": 1, "keep_trace": False, "cli": None, "peer": None,
            "rounds": 1, "layers_check": None, "expect_s": None}
# Key fields that enter the key only when set, so that configurations written before
# they existed keep their keys (and their committed rows stay current).
OPTIONAL_KEY_FIELDS = ("peer",)
# layers_holdout "none": an extrapolation over two depths with no third in the time (the bar
# is then the fit's timing noise alone: extrapolate.NO_HOLDOUT_METHOD).
NO_HOLDOUT = "none"
# Real peers a configuration can run instead of megatrain (baselines/peers/NAME.py).
PEERS = ("deepspeed_zero3", "fsdp2_offload", "megatrain_official")
# Real peers that run megatrain's own precision (the official code keeps bf16 weights, fp32 moments).
PAPER_PEERS = ("megatrain_official",)
# Peers as modelled by the sim and the planner (`megatrain --peer NAME`, baselines/PEERS.md),
# for the projected modes.
SIM_PEERS = ("deepspeed-zero3", "fsdp2-offload", "official")
# What a sweep file may hold besides its configurations (harness/sweep/README.md).
TOP_FIELDS = {"schema", "experiment", "description", "defaults", "matrix", "configs", "paths", "order",
              "hardware_from_gpu", "baseline", "figures", "claims", "comment"}
AUTO = "auto"  # a configuration's batch chosen by megatrain (`train --batch auto`)
CLI_KINDS = (None, "default")  # "default": the no-argument `megatrain` run (embedded model and corpus)


def load(path):
    """A sweep file, checked for its schema and top-level fields."""
    try:
        with open(path, encoding="utf-8") as f:
            s = common.resultslib.schema.loads(f.read())  # strictly: no NaN, Infinity or repeated key
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        die(f"{path}: cannot read sweep ({e})")
    if not isinstance(s, dict) or s.get("schema") != SWEEP_SCHEMA or not s.get("experiment"):
        die(f"{path}: not a {SWEEP_SCHEMA} file with an 'experiment' name")
    try:  # the experiment names its results file: a plain name, never a path
        common.safepath.name(s["experiment"], "experiment")
    except common.safepath.PathError as e:
        die(f"{path}: {e}")
    extra = set(s) - TOP_FIELDS
    if extra:
        die(f"{path}: unknown sweep field(s) {', '.join(sorted(extra))} (see harness/sweep/README.md)")
    for p in s.get("paths", []):
        if p not in ("cpu", "gpu"):
            die(f"{path}: paths may hold 'cpu' and 'gpu', not '{p}'")
    s["_path"] = path
    return s


def rel_path(path):
    """A sweep file's path as rows record it: relative to the repo root when inside it."""
    a = os.path.abspath(path)
    return os.path.relpath(a, REPO) if a.startswith(REPO + os.sep) else a


def set_dir(path):
    """Reads sweeps from another directory (tests); clears what was cached."""
    global SWEEP_DIR
    SWEEP_DIR = os.path.abspath(path)
    _keys_cache.clear()


def all_sweeps():
    """Every experiments/sweeps/*.json (or set_dir's), by (order, name)."""
    out = [load(p) for p in sorted(glob.glob(os.path.join(SWEEP_DIR, "*.json")))]
    return sorted(out, key=lambda s: (s.get("order", 1000), s["experiment"]))


def by_experiment():
    """{experiment: sweep} over experiments/sweeps/; an experiment named twice is an error."""
    d = {}
    for s in all_sweeps():
        if s["experiment"] in d:
            die(f"experiment '{s['experiment']}' is named by both {d[s['experiment']]['_path']} and {s['_path']}")
        d[s["experiment"]] = s
    return d


def with_hardware(sweep, hardware):
    """The sweep with every projected configuration's hardware profile replaced (the GPU
    path projects the sweeps marked hardware_from_gpu on the lent machine's profile)."""
    if not hardware:
        return sweep
    s = copy.deepcopy(sweep)
    for c in [s.get("defaults", {})] + list(s.get("configs") or []):
        if c.get("hardware"):
            c["hardware"] = hardware
    if "hardware" in s.get("matrix", {}):
        s["matrix"]["hardware"] = [hardware]
    return s


def expand(sweep):
    """The sweep's configurations: defaults < matrix combination < configs entry."""
    where = sweep.get("_path", sweep.get("experiment"))
    base = dict(DEFAULTS)
    base.update(sweep.get("defaults", {}))
    matrix = sweep.get("matrix", {})
    names = list(matrix)
    combos = [dict(zip(names, vals)) for vals in itertools.product(*(matrix[n] for n in names))] or [{}]
    entries = sweep.get("configs") or [{}]
    out, seen = [], set()
    for entry in entries:
        for combo in combos:
            c = copy.deepcopy(base)
            c.update(copy.deepcopy(combo))
            c.update(copy.deepcopy(entry))
            for k in c:
                if k not in DEFAULTS and k != "comment":
                    die(f"{where}: unknown configuration field '{k}' (see harness/sweep/README.md)")
            if c["tokens_per_step"]:
                if c["batch"] == AUTO:
                    die(f"{where}: batch 'auto' and tokens_per_step both set the batch; give one")
                c["batch"] = max(1, int(c["tokens_per_step"]) // int(c["seq_len"]))
            if c["mode"] not in MODES:
                die(f"{where}: mode '{c['mode']}' is not one of {', '.join(MODES)}")
            if c["cli"] not in CLI_KINDS:
                die(f"{where}: cli '{c['cli']}' is not one of {', '.join(str(k) for k in CLI_KINDS if k)}")
            if c["cli"] and c["mode"] != "measured":
                die(f"{where}: cli '{c['cli']}' runs only in mode measured")
            if not c["cli"] and not c["model"]:
                die(f"{where}: a configuration needs a model (HF config.json path)")
            if c["peer"] is not None and c["mode"] in ("projected", "projected-plan"):
                if c["peer"] not in SIM_PEERS:
                    die(f"{where}: projected peer '{c['peer']}' is not one of {', '.join(SIM_PEERS)} (baselines/PEERS.md)")
            elif c["peer"] is not None:
                if c["peer"] not in PEERS:
                    die(f"{where}: measured peer '{c['peer']}' is not one of {', '.join(PEERS)} (baselines/peers/README.md)")
                ok_prec = ("mixed", "fp32") + (("paper",) if c["peer"] in PAPER_PEERS else ())
                if c["mode"] != "measured" or c["cli"] or c["precision"] not in ok_prec:
                    die(f"{where}: a real peer runs in mode measured with precision mixed or fp32 (baselines/peers/README.md)")
            if c["mode"] in ("projected", "projected-plan") and not c["hardware"]:
                die(f"{where}: mode {c['mode']} needs a hardware profile")
            if c["mode"] == "projected":
                c["backend"] = "sim"
            if c["mode"] == "projected-plan":
                c["backend"] = "plan"
            check_batch(c, where)
            if c["mode"] == "extrapolated":
                fit, hold = c["layers_fit"], c["layers_holdout"]
                if not fit or len(fit) < 2 or len(set(fit)) != len(fit):
                    die(f"{where}: mode extrapolated needs layers_fit with >= 2 distinct depths")
                if hold == NO_HOLDOUT:
                    if c["steps"] < c["warmup"] + 3:
                        die(f"{where}: layers_holdout \"none\" sizes the bar from the runs' spread alone: it needs "
                            f"two timed steps a depth (steps >= warmup + 3)")
                elif not isinstance(hold, int) or hold in fit or hold == sum(fit) / len(fit):
                    die(f"{where}: mode extrapolated needs layers_holdout: one depth, not fitted and not the "
                        f"fitted depths' mean (the held-out check that sizes the error bar), or \"none\" "
                        f"(the bar is then the fit's timing noise alone, and the rows say so)")
                chk = c["layers_check"]
                if chk is not None and (not isinstance(chk, int) or chk in fit or chk == hold or chk < 1):
                    die(f"{where}: layers_check is one depth (the model's full depth) measured beside the fit, "
                        f"neither fitted nor held out")
            elif c["layers_check"] is not None or c["rounds"] != 1:
                die(f"{where}: rounds and layers_check belong to mode extrapolated")
            if not isinstance(c["rounds"], int) or not 1 <= c["rounds"] <= 20:
                die(f"{where}: rounds is a whole number of interleaved passes over the depths, 1..20")
            # One step more than warmup + 1: the last step carries the final optimizer pass
            # that no next step overlaps, so it is reported apart from the steady state.
            if c["mode"] in ("measured", "extrapolated", "projected") and c["steps"] < c["warmup"] + 2:
                die(f"{where}: steps ({c['steps']}) must be at least warmup ({c['warmup']}) + 2")
            k = config_key(c)
            if k not in seen:
                seen.add(k)
                out.append(c)
    return out


def check_batch(c, where):
    """batch: a whole number >= 1, or "auto" (megatrain's own choice, `train --batch auto`: a
    megatrain schedule measured on a backend with device memory, or projected; the row records
    what was chosen, see as_run)."""
    b = c["batch"]
    if b == AUTO:
        if c["peer"] is not None or c["cli"] or c["mode"] not in ("measured", "projected") or c["backend"] == "cpu":
            die(f"{where}: batch 'auto' is megatrain's `train --batch auto`: mode measured (a GPU backend) or "
                f"projected, no peer and no cli run (the cpu backend has no device memory to plan)")
    elif isinstance(b, bool) or not isinstance(b, int) or b < 1:
        die(f"{where}: batch {b!r} is not a whole number >= 1 or \"{AUTO}\"")


def as_run(c, row):
    """The configuration as the row ran it: a batch 'auto' configuration with the batch and the
    knobs its run chose (row['batch_auto'], one_config.py), so that a re-run (sim_check.py)
    prices the same step; any other configuration unchanged."""
    if c["batch"] != AUTO:
        return c
    chose = row.get("batch_auto") or {}
    if not isinstance(row.get("batch"), int) or not isinstance(chose.get("args"), list):
        die(f"{label(c)}: its row does not say which batch and knobs `--batch auto` chose (batch_auto.args); "
            "HINT: re-measure it with this harness")
    return dict(c, batch=row["batch"], args=list(c["args"]) + chose["args"])


def config_key(c):
    ident = {f: c.get(f) for f in KEY_FIELDS}
    ident.update({f: c[f] for f in OPTIONAL_KEY_FIELDS if c.get(f) is not None})
    return hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def model_name(c):
    if c["model_name"]:
        return c["model_name"]
    if c["cli"] == "default":
        return "default-tiny"
    return os.path.basename(c["model"] or "?").removesuffix(".json")


def system(c):
    """What a row's `system` says: the peer when the configuration runs one, else the schedule."""
    return c.get("peer") or c["schedule"]


def schedule_args(c):
    """The megatrain flags that choose it: --peer NAME, or --schedule NAME."""
    return ["--peer", c["peer"]] if c.get("peer") else ["--schedule", c["schedule"]]


def label(c):
    batch = "batch auto" if c["batch"] == AUTO else f"b{c['batch']}"
    parts = [model_name(c), system(c), batch, f"T{c['seq_len']}", c["precision"], c["backend"]]
    if c["cli"]:
        parts = [model_name(c), f"`megatrain` ({c['cli']} run)"]
    if c["hardware"]:
        parts.append(os.path.basename(str(c["hardware"])).removesuffix(".json"))
    if c["layers"]:
        parts.append(f"L{c['layers']}")
    if c["variant"]:
        parts.append(c["variant"])
    if c["host_mem_gb"]:
        parts.append(f"host{c['host_mem_gb']}G")
    return " ".join(str(p) for p in parts)


# ---------------------------------------------------------------- current vs stale rows
_keys_cache = {}


def current_configs(experiment, hardware_override=None, sweeps=None):
    """{config key: configuration} the experiment's sweep expands to now (under the row's
    hardware override); None when no sweep file names the experiment."""
    ck = (experiment, hardware_override)
    if ck not in _keys_cache:
        s = (sweeps if sweeps is not None else by_experiment()).get(experiment)
        _keys_cache[ck] = None if s is None else {config_key(c): c for c in expand(with_hardware(s, hardware_override))}
    return _keys_cache[ck]


def current_keys(experiment, hardware_override=None, sweeps=None):
    """The config keys of current_configs (a dict's keys: membership tests as before)."""
    return current_configs(experiment, hardware_override, sweeps)


def row_override(r):
    return (r.get("sweep") or {}).get("hardware_override")


def main(argv):
    """`sweeps.py --list cpu|gpu|baseline`: the sweep files reproduce.sh runs on that path
    (or whose rows are regression baselines), in order, one per line:
    PATH <tab> 1 if its projections take the lent GPU's profile, else 0 <tab> description."""
    if len(argv) != 3 or argv[1] != "--list" or argv[2] not in ("cpu", "gpu", "baseline"):
        print("usage: sweeps.py --list cpu|gpu|baseline", file=sys.stderr)
        return 2
    for s in all_sweeps():
        expand(s)  # a malformed sweep fails here, before anything runs
        take = s.get("baseline") if argv[2] == "baseline" else argv[2] in s.get("paths", [])
        if take:
            desc = " ".join(str(s.get("description", s["experiment"])).split())
            print(f"{rel_path(s['_path'])}\t{1 if s.get('hardware_from_gpu') else 0}\t{desc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
