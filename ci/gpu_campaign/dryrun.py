"""dryrun.py: a campaign sweep made small enough for the CPU (--dry-run, CI).

Every configuration keeps its experiment, system, mode, depth, arguments and variant, so
the dry run exercises the same runner path and writes rows of the same experiments; what
changes is the size: the model's width becomes TINY (its layout, depth and attention
grouping stay), batch / 8 (1..8: batches that differ stay apart), sequence length / 256
(16..1024: a context sweep keeps its shape), 4 steps with 1 warm-up, and the cpu backend where the sweep says cuda.
Extrapolated configurations run on the sim backend (h100-128g): a fit over wall-clock
times of tiny CPU runs would be noise; so do measured configurations with batch 'auto'
(`train --batch auto` refuses the cpu backend: it has no device memory to plan). Peer configurations are left out (they need torch,
DeepSpeed and a CUDA device) and listed. The result is written as a sweep file with the
same experiment name and explicit configurations (figures and claims dropped).
"""
import json
import os
import sys

from harness.sweep import sweeps

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

TINY = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 512}
KEEP = ("model", "model_name", "layers", "layers_fit", "layers_holdout", "schedule", "mode", "args",
        "grad_accum", "variant", "keep_trace", "hardware", "host_mem_gb", "seed")


def tiny_seq(seq_len):
    return min(1024, max(16, int(seq_len) // 256))


def tiny_batch(batch):
    return batch if batch == sweeps.AUTO else min(8, max(1, int(batch) // 8))


def tiny_config(c):
    e = {k: c[k] for k in KEEP if c.get(k) not in (None, [], {})}
    over = dict(TINY)
    with open(os.path.join(REPO, c["model"]) if not os.path.isabs(c["model"]) else c["model"]) as f:
        model = json.load(f)
    if "head_dim" in model:
        over["head_dim"] = TINY["hidden_size"] // TINY["num_attention_heads"]
    over.update(c.get("overrides") or {})
    e.update(overrides=over, batch=tiny_batch(c["batch"]), seq_len=tiny_seq(c["seq_len"]), steps=4, warmup=1,
             timeout_s=120, precision=c["precision"])
    if c["mode"] == "extrapolated" or (c["batch"] == sweeps.AUTO and c["mode"] == "measured"):
        # a fit over tiny CPU wall times would be noise; `train --batch auto` refuses the cpu backend
        e.update(backend="sim", hardware="h100-128g")
    elif c["mode"] in ("measured",):
        e["backend"] = "cpu"
    return e


def tiny_sweep(sweep, keys=None):
    """(the small sweep, labels of the peer configurations left out); with `keys`, only the
    configurations (of the real sweep) with those config keys."""
    out, dropped = [], []
    for c in sweeps.expand(sweep):
        if keys is not None and sweeps.config_key(c) not in keys:
            continue
        if c.get("peer"):
            dropped.append(sweeps.label(c))
            continue
        out.append(tiny_config(c))
    return ({"schema": sweep["schema"], "experiment": sweep["experiment"],
             "description": "dry run (ci/gpu_campaign.sh --dry-run) of " + sweeps.rel_path(sweep["_path"]),
             "configs": out}, dropped)


def tiny_sweep_file(path, out_dir, keys=None):
    s, dropped = tiny_sweep(sweeps.load(path), keys)
    dest = os.path.join(out_dir, os.path.basename(path))
    with open(dest, "w") as f:
        json.dump(s, f, indent=1)
    return dest, dropped
