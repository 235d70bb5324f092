"""resultslib: the results rows of the Python side, in one place for the sweep
(harness/sweep), the peers (baselines/peers) and the GPU campaign (ci/gpu_campaign).

Python 3 standard library only: the peers and the campaign run on the GPU machine,
whose python3 has no package registry (stdlib and torch). The package is imported from
the repo root (`python3 -m harness.sweep.run`, or PYTHONPATH=<repo>):

    from harness import resultslib        # from baselines/ or ci/
    from .. import resultslib             # from inside harness/

  schema.py    the one check of a results row (strict JSON, keys, types, finite figures,
               min <= median <= max), run by every reader as it loads rows; its command
               line: python3 -m harness.resultslib.validate_rows FILE...
  safepath.py  paths taken from data (a row's trace, a manifest's tag): plain names, or
               relative paths that stay inside their root; no tool writes over its input
  rows.py      the results schema (keys, env keys, side files), JSON Lines read, written
               and appended, and the filters every reader applies (ok, field, matches,
               tree_state, row_label: a row's configuration in one line)
  stats.py     step statistics (median; median/min/max over timed steps; a row's noise
               band) and the host's load average recorded beside timings
  timing.py    the one timing rule of every system's step times (steady_steps, RULE)
  profiles.py  experiments/hardware/NAME.json by name, and which profile describes the
               machine of a GPU: the names each profile matches are in the profile itself
               (gpu.name_match), read here and by the C planner alike

The metrics themselves (tokens/s, TFLOP/s, MFU, the dense-peak table) stay in
harness/metrics.py, their one Python definition.
"""
from .rows import (ENV_KEYS, RESULT_KEYS, RESULTS_SCHEMA, SIDE_FILES, RowsError, append_jsonl,  # noqa: F401
                   field, load_jsonl, load_results, load_results_files, load_rows, matches, ok, row_label,
                   tree_state, write_jsonl)
from .schema import MODES, load_json, row_problems  # noqa: F401
from . import safepath, schema  # noqa: F401
from .stats import load_avg, median, noise, spread, step_stats  # noqa: F401
from .timing import PHASES, RATIO, RULE as TIMING_RULE, steady_steps, total_steps  # noqa: F401
from .profiles import REPO, hardware_dir, hardware_profile, profile_of_gpu, profiles, same_gpu  # noqa: F401
