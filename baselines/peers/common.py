"""Shared pieces of the peer benchmarks (baselines/peers/*.py).

Everything a peer script needs so that its numbers are comparable with
megatrain's own rows (docs/DESIGN.md#metrics and docs/DESIGN.md#results):

  * the model: an HF config.json built with transformers'
    AutoModelForCausalLM.from_config (random init, --seed), optionally
    truncated in depth (--layers N: layers_run = N, layers_model = the config's);
  * the data: llm.c batching over a flat little-endian uint32 token file, or
    synthetic tokens drawn with the same windowing;
  * the loss: mean cross-entropy over all B*T tokens, computed from the final
    hidden states in token chunks, each chunk checkpointed, so no peer holds a
    full (B*T) x V logits tensor (like megatrain's chunked CE and the official
    code's 128-token loss head). The head's forward runs again for each chunk
    in backward (2*V*d extra FLOPs per token, not counted in tflops) unless
    --ce-keep-logits; the row's `work` and `work_differs` say which;
  * AdamW hyper-parameters: lr 3e-4, wd 0.1 on >=2-D tensors only, betas
    0.9/0.95, eps 1e-8, clip 1.0 (global L2 norm);
  * timing: the one rule of megatrain's rows (harness/resultslib/timing.py): batches staged
    before the window, >=2 warm-up steps, >=5 timed, one last step dropped, a synchronize at
    the window's edges only (CUDA events between steps); per-phase times only with --phases;
  * metrics: tflops = 6 * N_all * tokens / step_time (N_all = every parameter
    of the model that ran, embedding and head included, a tied matrix once);
    mfu against the dense bf16 peak: harness/metrics.py and megatrain/core/METRICS.md
    (the one definition of each metric), harness/dense_peaks.json (the one peak table);
  * the env block: harness/env.c's, through the mt-env binary ($MT_BIN or build/bin);
  * one results row with exactly the keys of docs/DESIGN.md#results, appended to a .jsonl file.

The training loop body (`train_step_torch`, `run_timed`) is plain PyTorch so
that tests can run it on the CPU without FSDP or DeepSpeed.

The pieces live by section, and this module re-exports them so that a peer script
(`import common`, first, before torch) reaches all of them as common.X:
  peer_base.py     the repo root, T0, the AdamW and timing rules, PeerError, log, skip
  peer_results.py  metrics, the env block, the results row, its report
  peer_data.py     TokenBatches
  peer_model.py    the model, its parameter count, checkpointing, the chunked loss, AdamW groups
  peer_loop.py     one torch step, the timed run, Phases
  common.py        the command line every peer shares, and the process guard
Rows are read, written and timed through harness/resultslib (the sweep's and the GPU
campaign's library too).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Optional

from . import peer_base  # noqa: F401  (first: T0 counts from here)
from .peer_base import (BETA1, BETA2, EPS, GRAD_CLIP, LR, MIN_STEPS, MIN_WARMUP, ROOT, T0,  # noqa: F401
                        WEIGHT_DECAY, PeerError, log, skip)
from .peer_data import TokenBatches  # noqa: F401
from .peer_loop import (Phases, phase_fields, run_and_report, run_timed, timing_fields,  # noqa: F401
                        train_step_torch)
from .peer_model import (ModelSpec, adamw_param_groups, build_model, check_host_budget,  # noqa: F401
                         checkpoint_each_layer, chunked_ce_mean, count_params, count_params_meta,
                         decoder_layers, host_mem_available, load_config, make_loss_model, work_fields)
from .peer_results import (ENV_KEYS, RESULT_KEYS, SCHEMA, append_jsonl, collect_env, emit_row,  # noqa: F401
                           dense_peak_tflops, error_row, make_row, peak_host_bytes, report,
                           step_stats_ms, throughput, write_jsonl)
from harness import resultslib  # after peer_base: T0 counts from the first import
from harness.resultslib import TIMING_RULE, load_avg  # noqa: F401  (the rule of every timing; the 1-minute load average)


# ------------------------------------------------------------------------ CLI

def add_common_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--config", required=True, help="HF config.json (or a directory holding one)")
    ap.add_argument("--layers", type=int, default=None,
                    help="run N decoder layers (layers_run); layers_model stays the config's")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--data", default="synthetic", help="flat uint32 token file, or 'synthetic'")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--warmup", type=int, default=MIN_WARMUP, help="warm-up steps (>= 2)")
    ap.add_argument("--steps", type=int, default=MIN_STEPS, help="timed steps (>= 5)")
    ap.add_argument("--precision", default="mixed", choices=["mixed", "fp32"],
                    help="mixed: fp32 master + fp32 Adam moments, bf16 compute (default); fp32: all fp32")
    ap.add_argument("--ce-chunk", type=int, default=4096, help="tokens per loss-head chunk")
    ap.add_argument("--experiment", default="peers")
    ap.add_argument("--out", default=None, help="append the results row to this .jsonl")
    ap.add_argument("--phases", action="store_true",
                    help="time forward, backward and optimizer apart (a synchronize between them): a separate "
                         "run whose row is marked timing 'phases', never one that gives a ratio")
    ap.add_argument("--ce-keep-logits", action="store_true",
                    help="keep each loss chunk's logits for backward (the head's forward once, as megatrain) "
                         "instead of recomputing them (B*T*V*4 bytes of GPU memory)")
    ap.add_argument("--checkpoint-last", action="store_true",
                    help="checkpoint the last layer too (HF's gradient_checkpointing; megatrain keeps its activations)")
    ap.add_argument("--allow-short", action="store_true",
                    help="permit fewer than 2 warm-up / 5 timed steps (smoke tests only)")


def parse_common_args(ap: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """A torch peer's command line: its parser (add_common_args and its own options) with
    --no-checkpointing last, parsed and checked (check_common_args)."""
    ap.add_argument("--no-checkpointing", action="store_true",
                    help="disable per-layer activation checkpointing")
    a = ap.parse_args(argv)
    check_common_args(a)
    return a


def check_common_args(a) -> None:
    if not a.allow_short and (a.warmup < MIN_WARMUP or a.steps < MIN_STEPS):
        raise PeerError("--warmup must be >= %d and --steps >= %d (docs/DESIGN.md#metrics timing rule)"
                        % (MIN_WARMUP, MIN_STEPS))
    if a.steps < 1 or a.warmup < 0:
        raise PeerError("--steps must be >= 1 and --warmup >= 0")
    if a.batch < 1 or a.seq_len < 1:
        raise PeerError("--batch and --seq-len must be >= 1")
    check_out(a.out, [a.config, None if a.data == "synthetic" else a.data])


def check_out(out: Optional[str], inputs) -> None:
    """PeerError unless `out` (if set) is a file to write that is none of the inputs (the
    same file, a link to one, or a file in an input folder: resultslib.safepath)."""
    if not out:
        return
    if os.path.isdir(out):
        raise PeerError("--out %s is a folder, not a .jsonl file" % out)
    try:
        resultslib.safepath.refuse_own_input(out, inputs)
    except resultslib.safepath.PathError as e:
        raise PeerError(str(e))


def setup_single_rank_env(port: Optional[int] = None) -> None:
    """torch.distributed env:// variables for a world of one process."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if port is None:
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    os.environ.setdefault("MASTER_PORT", str(port))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_WORLD_SIZE", "1")


def main_guard(fn: Callable[[], int], prog: str) -> None:
    """Runs fn; a PeerError is one line on stderr and exit status 1."""
    try:
        rc = fn()
    except PeerError as e:
        print("%s: %s" % (prog, e), file=sys.stderr, flush=True)
        sys.exit(1)
    sys.exit(rc or 0)
