#!/usr/bin/env python3
"""derive_eager_scale.py: how much slower the HF model's eager PyTorch kernels run than ours,
derived from DeepSpeed's measured forward phase (the peer models' `eager_scale`,
megatrain/engine/schedule.c; baselines/PEERS.md, "DeepSpeed measured on the H200").

    python3 -m baselines.peers.derive_eager_scale [--rows results/gpu_c2_deepspeed.jsonl]
        [--hardware h200-128g] [--bin build/bin] [--check X]

DeepSpeed's rows (ZeRO-3 offload, mixed precision, two batches of one model on one GPU) time
the forward between torch.cuda.synchronize() calls. Per step the forward pays fixed costs
(hooks, fetches) and per token the compute; the slope over tokens between the two batches
is the compute alone. The sim runs the same peer at the same two batches on the GPU's
profile; its ops trace gives the forward's attention and its other kernels. So

    eager_scale = (measured forward slope - sim attention slope) / sim other-kernels slope

(the sim's other kernels at scale 1: its trace divided by the scale the peer carries now,
since the scale multiplies each of them exactly: GEMMs and memory-bound ops alike). The
backward is not used: the script prints what the scale predicts for it (recompute plus
backward) against the measured backward slope, an out-of-sample check, and the sim's
whole step against the measured one at both batches.

Prints one JSON object. --check X: exit 1 unless X (the constant in schedule.c) is the
derived scale to 3 decimals. Exit 2 for a bad command line or missing rows.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from harness import resultslib  # the row check every reader of results rows applies

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER, PEER_SYSTEM = "deepspeed-zero3", "deepspeed_zero3"


def die(msg, rc=2):
    print(f"derive_eager_scale: {msg}", file=sys.stderr)
    sys.exit(rc)


def rows_of(path):
    if not os.path.isfile(path):
        die(f"{path}: no such file")
    try:
        rows = resultslib.load_rows(path)
    except (OSError, resultslib.RowsError) as e:
        die(f"{e}")
    ds = {r["batch"]: r for r in rows if r.get("system") == PEER_SYSTEM and not r.get("error") and r.get("fwd_ms")}
    if len(ds) < 2:
        die(f"{path}: needs DeepSpeed rows with fwd_ms at two batches (has {sorted(ds)})")
    lo, hi = sorted(ds)[0], sorted(ds)[-1]
    return ds[lo], ds[hi]


def cut_config(row, tmp):
    """The model as the row ran it (its depth cut), as harness/sweep writes it."""
    try:  # a path taken from the row: inside the repository, or refused
        model = resultslib.safepath.inside(ROOT, (row.get("config") or {}).get("model"), "config.model")
    except resultslib.safepath.PathError as e:
        die(str(e))
    cfg = json.load(open(model))
    if row.get("layers_run") and row["layers_run"] != cfg["num_hidden_layers"]:
        cfg["num_hidden_layers"] = row["layers_run"]
        if "max_window_layers" in cfg:
            cfg["max_window_layers"] = min(cfg["max_window_layers"], row["layers_run"])
    path = os.path.join(tmp, "model.json")
    json.dump(cfg, open(path, "w"))
    return path


def sim(mt, cfg, row, hardware, tmp):
    """(forward attention ms, forward other ms, backward attention ms, backward other ms, step ms)
    of the sim's last step (a later step: no first-step effects), from its ops trace."""
    trace = os.path.join(tmp, f"b{row['batch']}.json")
    cmd = [mt, "train", "--backend", "sim", "--hardware", hardware, "--peer", PEER, "--config", cfg, "--init", "random",
           "--batch", str(row["batch"]), "--seq-len", str(row["seq_len"]), "--precision", row["precision"],
           "--steps", "3", "--data", "synthetic", "--trace", trace]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        die(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}", 1)
    steps = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    ev = json.load(open(trace + ".ops.json"))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    lanes = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"
             and e.get("pid") == 1}
    comp = sorted((e for e in ev if e.get("ph") == "X" and e.get("pid") == 1 and lanes.get(e["tid"]) == "compute"),
                  key=lambda e: e["ts"])
    starts = [i for i, e in enumerate(comp) if e["name"] == "embedding_fwd"]
    t = {"fa": 0.0, "fo": 0.0, "ba": 0.0, "bo": 0.0}
    backward = False
    for e in comp[starts[1]:starts[2]]:  # the second step (the third's optimizer has no next step)
        backward = backward or e["name"].endswith("_bwd") or e["name"] in ("xent_fwd_bwd", "rmsnorm_bwd_add")
        key = ("b" if backward else "f") + ("a" if e["name"].startswith("attention") else "o")
        t[key] += e["dur"] / 1e3
    return t, steps[1]["step_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default=os.path.join(ROOT, "results", "gpu_c2_deepspeed.jsonl"))
    ap.add_argument("--hardware", default="h200-128g", help="the profile of the GPU the rows were measured on")
    ap.add_argument("--bin", default=os.environ.get("MT_BIN") or os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--check", type=float, help="the scale the peer carries: exit 1 unless it is the derived one")
    a = ap.parse_args()
    mt = os.path.join(a.bin, "megatrain")
    if not os.access(mt, os.X_OK):
        die(f"{mt}: not built (make build)")
    lo, hi = rows_of(a.rows)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = cut_config(lo, tmp)
        plan = subprocess.run([mt, "plan", "--config", cfg, "--batch", str(lo["batch"]), "--seq-len", str(lo["seq_len"]),
                               "--precision", lo["precision"], "--hardware", a.hardware, "--peer", PEER],
                              capture_output=True, text=True)
        if plan.returncode:
            die(f"megatrain plan --peer {PEER}: {plan.stderr.strip()}", 1)
        now = json.loads(plan.stdout)["peer"].get("eager_scale") or 1.0
        (s_lo, step_lo), (s_hi, step_hi) = sim(mt, cfg, lo, a.hardware, tmp), sim(mt, cfg, hi, a.hardware, tmp)
    dn = (hi["batch"] - lo["batch"]) * lo["seq_len"]  # tokens between the two rows
    slope = lambda x, y: (y - x) / dn * 1e3  # noqa: E731  (microseconds a token)
    fa, fo = slope(s_lo["fa"], s_hi["fa"]), slope(s_lo["fo"], s_hi["fo"]) / now
    ba, bo = slope(s_lo["ba"], s_hi["ba"]), slope(s_lo["bo"], s_hi["bo"]) / now
    meas_f, meas_b = slope(lo["fwd_ms"], hi["fwd_ms"]), slope(lo["bwd_ms"], hi["bwd_ms"])
    scale = (meas_f - fa) / fo
    out = {"eager_scale": round(scale, 3), "peer": PEER, "hardware": a.hardware, "rows": os.path.relpath(a.rows, ROOT),
           "batches": [lo["batch"], hi["batch"]], "scale_in_use": now,
           "forward_us_per_token": {"measured": round(meas_f, 3), "sim_attention": round(fa, 3),
                                    "sim_other_at_scale_1": round(fo, 3)},
           "backward_us_per_token_check": {"measured": round(meas_b, 3), "predicted": round(ba + scale * bo, 3),
                                           "error": round((ba + scale * bo) / meas_b - 1, 4)},
           "step_ms_at_scale_in_use": {str(lo["batch"]): {"measured": round(lo["step_ms"]["median"], 1), "sim": round(step_lo, 1)},
                                       str(hi["batch"]): {"measured": round(hi["step_ms"]["median"], 1), "sim": round(step_hi, 1)}},
           "how": "slopes over tokens between the two batches: the measured forward phase less the sim's attention, "
                  "over the sim's other forward kernels at scale 1"}
    print(json.dumps(out))
    if a.check is not None and round(a.check, 3) != round(scale, 3):
        print(f"derive_eager_scale: the peer carries {a.check:.3f}; the rows derive {scale:.3f} "
              f"(HINT: set MT_PEER_EAGER_SCALE in megatrain/engine/schedule.c)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
