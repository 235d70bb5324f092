"""Shared helpers for the sweep runner, the exporter and the claims table.

Python 3 standard library only: these scripts also run on the GPU machine, which
has python3 but no jq or gnuplot.
"""
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS_SCHEMA = "megatrain.results/1"
SWEEP_SCHEMA = "megatrain.sweep/1"
# results/ files that are not results rows (their own schema, their own writer and test):
# the claims, figures and filing leave them alone.
SIDE_FILES = {"cpu_optimizers.jsonl": "megatrain.cpu_optimizers/1",  # baselines/peers/cpu_optimizers.py
              "peer_hooks.jsonl": "megatrain.peer_hooks/1"}  # baselines/peers/stage3_hooks.py

# The keys docs/DESIGN.md#results fixes for every results row, in the order rows are written.
RESULT_KEYS = ["schema", "experiment", "system", "mode", "model", "params", "layers_run",
               "layers_model", "batch", "seq_len", "precision", "step_ms", "tokens_per_s",
               "tflops", "mfu", "gpu_busy_frac", "h2d_gbps", "peak_gpu_bytes",
               "peak_host_bytes", "env"]
ENV_KEYS = ["git_sha", "git_dirty", "gpu_name", "gpu_mem_bytes", "driver", "cuda",
            "host_mem_bytes", "cpu_model", "cpu_cores", "numa_nodes", "gpu_numa_node",
            "pcie_gbps", "hardware_profile", "utc"]


def die(msg, code=2):
    print(f"sweep: {msg}", file=sys.stderr)
    sys.exit(code)


def bin_dir(arg=None):
    """The directory of the megatrain binaries: --bin, else $MT_BIN, else build/bin."""
    return os.path.abspath(arg or os.environ.get("MT_BIN") or os.path.join(REPO, "build", "bin"))


def load_jsonl(path):
    """Rows of a JSON Lines file ([] when it does not exist); a bad line is an error."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                die(f"{path}:{n}: not a JSON object ({e})")
    return rows


def load_results(results_dir):
    """All rows of every results/*.jsonl (baselines/ and SIDE_FILES excluded), in file order."""
    rows = []
    if not os.path.isdir(results_dir):
        return rows
    for name in sorted(os.listdir(results_dir)):
        if name.endswith(".jsonl") and name not in SIDE_FILES:
            rows.extend(load_jsonl(os.path.join(results_dir, name)))
    return rows


def load_results_files(results_dir):
    """{file name: rows} of every results/*.jsonl (baselines/ and SIDE_FILES excluded)."""
    out = {}
    if os.path.isdir(results_dir):
        for name in sorted(os.listdir(results_dir)):
            if name.endswith(".jsonl") and name not in SIDE_FILES:
                out[name] = load_jsonl(os.path.join(results_dir, name))
    return out


def write_jsonl(path, rows):
    """Writes rows atomically: a temp file beside the target, then one rename."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    os.replace(tmp, path)


def tree_state(r):
    """'clean', 'dirty' or 'unknown': the git state of the tree that made the row."""
    d = (r.get("env") or {}).get("git_dirty")
    return "clean" if d is False else "dirty" if d is True else "unknown"


def trusted(rows, allow_dirty=False, what="rows"):
    """The rows a table or figure may use: made from a clean tree (unless allow_dirty) by
    a sweep entry that still exists (rows of an experiment without a sweep file, e.g. a
    peer run, are judged by their tree state alone). Says on stderr what it left out."""
    import sweeps  # noqa: E402 (sweeps imports this module)
    table = sweeps.by_experiment()
    kept, dirty, stale = [], {}, {}
    for r in rows:
        exp = r.get("experiment")
        keys = sweeps.current_keys(exp, sweeps.row_override(r), table) if exp in table else None
        if keys is not None and r.get("config_key") not in keys:
            stale[exp] = stale.get(exp, 0) + 1
        elif tree_state(r) != "clean" and not allow_dirty:
            k = f"{exp} ({tree_state(r)} tree)"
            dirty[k] = dirty.get(k, 0) + 1
        else:
            kept.append(r)
    if stale:
        print(f"{what}: left out rows of sweep entries that no longer exist: "
              + ", ".join(f"{k} {v}" for k, v in sorted(stale.items()))
              + "; HINT: re-run the sweep (it rewrites its file)", file=sys.stderr)
    if dirty:
        print(f"{what}: left out rows made from a dirty or unknown tree: "
              + ", ".join(f"{k} {v}" for k, v in sorted(dirty.items()))
              + "; HINT: re-run from a clean committed tree, or pass --allow-dirty", file=sys.stderr)
    return kept


def hardware_profile(name):
    """The parsed experiments/hardware/NAME.json (or a path), None if absent."""
    if not name or name == "measured":
        return None
    hw_dir = os.environ.get("MT_HARDWARE_DIR") or os.path.join(REPO, "experiments", "hardware")  # tests
    path = name if name.endswith(".json") else os.path.join(hw_dir, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def profile_of_gpu(gpu_name):
    """The profile of the lent machine with this GPU (experiments/hardware/), None if none."""
    g = gpu_name or ""
    return "h200-128g" if "H200" in g else "h100-128g" if "H100" in g else None


def same_gpu(proj, meas):
    """A projection pairs with a measurement when its profile is the measured machine's."""
    g = (meas.get("env") or {}).get("gpu_name") or ""
    hw = proj.get("hardware") or ""
    if meas.get("backend") == "cpu":
        return hw.startswith("cpu")
    return ("H100" in g and hw.startswith("h100")) or ("H200" in g and hw.startswith("h200-128g"))


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
