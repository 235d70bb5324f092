"""Results rows: the schema, JSON Lines in and out, the filters every reader applies."""
import json
import os

from . import safepath, schema
from .schema import ENV_KEYS, RESULT_KEYS, RESULTS_SCHEMA, RowsError  # noqa: F401 (the schema, here since before)

# results/ files that are not results rows (their own schema, their own writer and test):
# the claims, figures and filing leave them alone.
SIDE_FILES = {"cpu_optimizers.jsonl": "megatrain.cpu_optimizers/1",  # baselines/peers/cpu_optimizers.py
              "peer_hooks.jsonl": "megatrain.peer_hooks/1"}  # baselines/peers/stage3_hooks.py


# ---------------------------------------------------------------- JSON Lines
def load_jsonl(path, shape=None):
    """Objects of a JSON Lines file ([] when it does not exist), strictly parsed
    (schema.loads: no NaN or Infinity); with shape ("results", "baseline") each is also a
    good results row (schema.row_problems). A bad line raises RowsError naming file:line."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            r = schema.parse_line(line, f"{path}:{n}")
            if shape:
                schema.check_row(r, f"{path}:{n}", shape)
            elif not isinstance(r, dict):
                raise RowsError(f"{path}:{n}: a JSON {type(r).__name__}, not an object")
            rows.append(r)
    return rows


def load_rows(path, shape="results"):
    """The results rows of a file, each checked (schema.row_problems); load_jsonl."""
    return load_jsonl(path, shape)


def load_results_files(results_dir):
    """{file name: rows} of every results/*.jsonl (baselines/ and SIDE_FILES excluded)."""
    out = {}
    if os.path.isdir(results_dir):
        for name in sorted(os.listdir(results_dir)):
            if name.endswith(".jsonl") and name not in SIDE_FILES:
                out[name] = load_rows(os.path.join(results_dir, name))
    return out


def load_results(results_dir):
    """All rows of every results/*.jsonl (baselines/ and SIDE_FILES excluded), in file order."""
    return [r for rows in load_results_files(results_dir).values() for r in rows]


def write_jsonl(path, rows, compact=True):
    """Replaces `path` with `rows`, one JSON line each, atomically (safepath.write_bytes: a
    temp file beside the target, then one rename: an interrupted run leaves the old file
    whole, and the file keeps its mode). compact: no spaces after ',' and ':' (the sweep's
    files); else json.dumps' default (the peers')."""
    sep = (",", ":") if compact else None
    safepath.write_bytes(path, "".join(json.dumps(r, separators=sep) + "\n" for r in rows).encode())


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
