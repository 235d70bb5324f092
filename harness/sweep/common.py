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

# The keys DESIGN.md fixes for every results row, in the order rows are written.
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
    """All rows of every results/*.jsonl (baselines/ excluded), in file order."""
    rows = []
    if not os.path.isdir(results_dir):
        return rows
    for name in sorted(os.listdir(results_dir)):
        if name.endswith(".jsonl"):
            rows.extend(load_jsonl(os.path.join(results_dir, name)))
    return rows


def hardware_profile(name):
    """The parsed experiments/hardware/NAME.json (or a path), None if absent."""
    if not name or name == "measured":
        return None
    path = name if name.endswith(".json") else os.path.join(REPO, "experiments", "hardware", name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
