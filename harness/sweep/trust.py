"""trust.py: which rows a table or figure may use (a clean tree, a sweep entry that still
exists). Apart from common.py because it reads the sweeps, and sweeps.py reads common."""
import sys

from . import sweeps
from .common import load_results, tree_state


def trusted_results(results_dir, allow_dirty=False, what="rows", sweeps_dir=None):
    """The trusted rows (below) of a results directory, the sweeps read from sweeps_dir
    (a reader's --sweeps) where given."""
    if sweeps_dir:
        sweeps.set_dir(sweeps_dir)
    return trusted(load_results(results_dir), allow_dirty, what)


def trusted(rows, allow_dirty=False, what="rows"):
    """The rows a table or figure may use: made from a clean tree (unless allow_dirty) by
    a sweep entry that still exists (rows of an experiment without a sweep file, e.g. a
    peer run, are judged by their tree state alone). Says on stderr what it left out."""
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
