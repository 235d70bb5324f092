"""Shared helpers for the sweep runner, the exporter and the claims table: the sweep's
own (its schema, its errors, which rows are trusted), over harness/resultslib (rows,
statistics, profiles), which the peers and the GPU campaign share.

Python 3 standard library only: these scripts also run on the GPU machine, which
has python3 but no jq or gnuplot.
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "harness"))
import resultslib  # noqa: E402
# the results schema, writing and statistics, as the sweep's scripts and tests name them
from resultslib import (ENV_KEYS, RESULT_KEYS, RESULTS_SCHEMA, SIDE_FILES, TIMING_RULE, median,  # noqa: E402,F401
                        safepath, tree_state, write_jsonl)

SWEEP_SCHEMA = "megatrain.sweep/1"


def die(msg, code=2):
    print(f"sweep: {msg}", file=sys.stderr)
    sys.exit(code)


def not_own_input(out, inputs, what="--out", out_is_dir=False):
    """Dies (exit 2) when `out` is one of the files the tool reads, a link to one, or lies in a
    folder it reads (safepath.refuse_own_input)."""
    try:
        safepath.refuse_own_input(out, inputs, what, out_is_dir)
    except safepath.PathError as e:
        die(str(e))


def load_json(path):
    """A JSON file strictly parsed (resultslib.schema.loads: no NaN or Infinity); dies (exit 2)
    naming the file where it is not JSON."""
    try:
        with open(path) as f:
            return resultslib.schema.loads(f.read())
    except (OSError, ValueError) as e:
        die(f"{path}: not JSON ({e})")


def write_text(out, text, inputs, what="--out"):
    """Replaces `out` with text atomically, unless it is one of the inputs (dies, exit 2)."""
    not_own_input(out, inputs, what)
    try:
        safepath.write_bytes(out, text.encode())
    except (OSError, safepath.PathError) as e:  # a folder, a place that cannot be written
        die(f"{what} {out}: cannot write ({getattr(e, 'strerror', None) or e})")


def trace_path(root, r):
    """root/<the row's trace>, once safepath has it inside root (dies, exit 2, if not)."""
    try:
        return safepath.inside(root, r["trace"], "trace")
    except safepath.PathError as e:
        die(str(e))


def bin_dir(arg=None):
    """The directory of the megatrain binaries: --bin, else $MT_BIN, else build/bin."""
    return os.path.abspath(arg or os.environ.get("MT_BIN") or os.path.join(REPO, "build", "bin"))


def _or_die(read):
    """resultslib's reader, a bad line a sweep error (exit 2) with the file and line."""
    def wrapped(*args):
        try:
            return read(*args)
        except resultslib.RowsError as e:
            die(str(e))
    wrapped.__doc__ = read.__doc__
    return wrapped


load_jsonl = _or_die(resultslib.load_jsonl)
load_rows = _or_die(resultslib.load_rows)  # results rows, each through resultslib's schema check
load_results = _or_die(resultslib.load_results)
load_results_files = _or_die(resultslib.load_results_files)


def trusted_results(results_dir, allow_dirty=False, what="rows", sweeps_dir=None):
    """The trusted rows (below) of a results directory, the sweeps read from sweeps_dir
    (a reader's --sweeps) where given."""
    if sweeps_dir:
        import sweeps  # noqa: E402 (sweeps imports this module)
        sweeps.set_dir(sweeps_dir)
    return trusted(load_results(results_dir), allow_dirty, what)


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
