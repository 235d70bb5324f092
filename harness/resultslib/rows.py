"""Results rows: the schema, JSON Lines in and out, the filters every reader applies."""
import json
import os

RESULTS_SCHEMA = "megatrain.results/1"
# The keys docs/DESIGN.md#results fixes for every results row, in the order rows are written.
RESULT_KEYS = ("schema", "experiment", "system", "mode", "model", "params", "layers_run",
               "layers_model", "batch", "seq_len", "precision", "step_ms", "tokens_per_s",
               "tflops", "mfu", "gpu_busy_frac", "h2d_gbps", "peak_gpu_bytes",
               "peak_host_bytes", "env")
ENV_KEYS = ("git_sha", "git_dirty", "gpu_name", "gpu_mem_bytes", "driver", "cuda",
            "host_mem_bytes", "cpu_model", "cpu_cores", "numa_nodes", "gpu_numa_node",
            "pcie_gbps", "hardware_profile", "utc")
# results/ files that are not results rows (their own schema, their own writer and test):
# the claims, figures and filing leave them alone.
SIDE_FILES = {"cpu_optimizers.jsonl": "megatrain.cpu_optimizers/1",  # baselines/peers/cpu_optimizers.py
              "peer_hooks.jsonl": "megatrain.peer_hooks/1"}  # baselines/peers/stage3_hooks.py


class RowsError(ValueError):
    """A file of rows that cannot be read: one line naming the file and the line."""


# ---------------------------------------------------------------- JSON Lines
def load_jsonl(path):
    """Rows of a JSON Lines file ([] when it does not exist); a bad line raises RowsError."""
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
                raise RowsError(f"{path}:{n}: not a JSON object ({e})")
    return rows


def load_results_files(results_dir):
    """{file name: rows} of every results/*.jsonl (baselines/ and SIDE_FILES excluded)."""
    out = {}
    if os.path.isdir(results_dir):
        for name in sorted(os.listdir(results_dir)):
            if name.endswith(".jsonl") and name not in SIDE_FILES:
                out[name] = load_jsonl(os.path.join(results_dir, name))
    return out


def load_results(results_dir):
    """All rows of every results/*.jsonl (baselines/ and SIDE_FILES excluded), in file order."""
    return [r for rows in load_results_files(results_dir).values() for r in rows]


def write_jsonl(path, rows, compact=True):
    """Replaces `path` with `rows`, one JSON line each, atomically (a temp file beside the
    target, then one rename: an interrupted run leaves the old file whole). compact: no
    spaces after ',' and ':' (the sweep's files); else json.dumps' default (the peers')."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    sep = (",", ":") if compact else None
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r, separators=sep) + "\n")
    os.replace(tmp, path)


def append_jsonl(path, row):
    """Appends one compact line; a single write() of a complete line, so concurrent
    appenders never interleave within a row."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    line = (json.dumps(row, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- filters
def ok(r, need="tokens_per_s"):
    """A row with a timing: no error, step_ms set, and the figure `need` computed; never a
    row timed with per-phase synchronizes (timing "phases", resultslib/timing.py): its step
    times carry the timers' cost, so no ratio or figure is taken from it."""
    return "error" not in r and r.get("timing") != "phases" and r.get("step_ms") and r.get(need) is not None


def field(r, path):
    """A (dotted) field of a row: field(r, "env.gpu_name"); None where absent."""
    v = r
    for part in path.split("."):
        if not isinstance(v, dict):
            return None
        v = v.get(part)
    return v


def matches(r, where):
    """Whether a row has every field of `where` (dotted keys; a list value: any of them)."""
    for k, want in (where or {}).items():
        v = field(r, k)
        if (v not in want) if isinstance(want, list) else (v != want):
            return False
    return True


def tree_state(r):
    """'clean', 'dirty' or 'unknown': the git state of the tree that made the row."""
    d = (r.get("env") or {}).get("git_dirty")
    return "clean" if d is False else "dirty" if d is True else "unknown"
