"""Shared helpers for the sweep runner, the exporter and the claims table: the sweep's
own (its schema, its errors), over harness/resultslib (rows,
statistics, profiles), which the peers and the GPU campaign share.

Python 3 standard library only: these scripts also run on the GPU machine, which
has python3 but no jq or gnuplot.
"""
import os
import sys

from .. import resultslib
# the results schema, writing and statistics, as the sweep's scripts and tests name them
from ..resultslib import (ENV_KEYS, RESULT_KEYS, RESULTS_SCHEMA, SIDE_FILES, TIMING_RULE, median,  # noqa: F401
                          safepath, tree_state, write_jsonl)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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
