#!/usr/bin/env python3
"""peer_check.py: the sim's models of the peers (`--peer`, baselines/PEERS.md) against every
measured row of the real peer, on the calibrated profile of the GPU that measured it.

    python3 -m harness.sweep.peer_check [--results results] [--bin DIR] [--within 0.15]

Which rows: every measured GPU row of a real peer (DeepSpeed ZeRO-3 offload, FSDP2 offload, the
official MegaTrain code: harness/sweep/sweeps.py PEERS) in results/*.jsonl, without an error.
Each is re-run in the sim from its own sweep configuration (model, depth, batch, sequence,
precision, steps, warm-up) with the peer's model (PEERS -> SIM_PEERS) on the profile of its GPU
(gpu.name_match), as sim_check.py re-runs megatrain's rows. Per row it prints the measured and
modelled step, the error and the measured phases beside it; a row of a peer that has no model yet
is said, not dropped. Passes when every row is within `within` (issue 26: 15%) plus the row's
own noise; otherwise names the rows and exits 1. Nothing is written.
"""
import argparse
import os
import sys
import tempfile

from . import common, sweeps
from .megatrain_cli import RunError, Runner
from .sim_check import sim_row
from .. import resultslib
from ..resultslib import noise, ok
from ..resultslib import row_label as label

# The real peer's runner name -> the sim's model of it (the two tuples are in the same order).
MODEL_OF = dict(zip(sweeps.PEERS, sweeps.SIM_PEERS))
PHASES = ("fwd_ms", "bwd_ms", "optimizer_ms")  # what the peers' runners time (baselines/peers/peer_loop.py)


def fail(msg):
    print(f"peer_check: {msg}", file=sys.stderr)
    sys.exit(1)


def measured_peer_rows(results):
    return [r for r in common.load_results(results) if ok(r) and r.get("mode") == "measured"
            and r.get("system") in MODEL_OF and (r.get("env") or {}).get("gpu_name")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.path.join(common.REPO, "results"))
    ap.add_argument("--bin", help="directory of the megatrain binaries (default $MT_BIN, else build/bin)")
    ap.add_argument("--within", type=float, default=0.15, help="the band each model must hold (issue 26: 0.15)")
    a = ap.parse_args()
    rows = measured_peer_rows(a.results)
    if not rows:
        fail(f"no measured GPU row of a real peer in {a.results}; HINT: the campaign's part B measures them")
    bad, seen = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        R = Runner(common.bin_dir(a.bin), tmp, timeout=300)
        for m in rows:
            key, gpu = label(m), m["env"]["gpu_name"]
            prof = resultslib.profile_of_gpu(gpu)
            if not prof:
                fail(f"{key}: no profile matches GPU {gpu!r}; HINT: gpu.name_match in experiments/hardware/*.json")
            c = (sweeps.current_configs(m["experiment"], sweeps.row_override(m)) or {}).get(m.get("config_key"))
            if c is None:
                fail(f"{key}: its sweep entry ({m['experiment']}, key {m.get('config_key')}) no longer exists")
            try:
                s = sim_row(R, dict(c, peer=MODEL_OF[m["system"]]), prof, [])
            except RunError as e:
                fail(f"{key}: the sim's model of {m['system']} failed: {e}")
            mm = m["step_ms"]["median"]
            err, nm = s["step_ms"] / mm - 1, noise(m)
            inside = abs(err) <= a.within + nm
            seen.add(m["system"])
            phases = ", ".join(f"{k[:-3]} {m[k]:.0f}" for k in PHASES if isinstance(m.get(k), (int, float)))
            print(f"{key}: measured {mm:.0f} ms ({phases or 'no phases'}), model ({MODEL_OF[m['system']]} on {prof}) "
                  f"{s['step_ms']:.0f} ms, {100 * err:+.1f}% (noise ±{100 * nm:.1f}%) [{'ok' if inside else 'OUTSIDE'}]")
            if not inside:
                bad.append(f"{key} {100 * err:+.1f}%")
    missing = [p for p in sweeps.PEERS if p not in seen]
    if missing:
        print(f"peer_check: no measured row yet of {', '.join(missing)}: their models are unchecked")
    if bad:
        fail(f"outside ±{100 * a.within:.0f}% (plus the row's noise): " + "; ".join(bad))
    print(f"peer_check: every measured peer row is within ±{100 * a.within:.0f}% of its model")
    return 0


if __name__ == "__main__":
    sys.exit(main())
