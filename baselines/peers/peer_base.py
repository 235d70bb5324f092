"""peer_base.py: what every part of the peers' shared code starts from (common.py
re-exports it): the repo root, the
process's start, the AdamW and timing rules, the one error and the log. Stdlib only.
"""

from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

T0 = time.time()  # this module is imported first, before torch: setup_s counts from here

# AdamW defaults of docs/DESIGN.md#batching-loss-and-optimizer-semantics.
LR, WEIGHT_DECAY, BETA1, BETA2, EPS, GRAD_CLIP = 3e-4, 0.1, 0.9, 0.95, 1e-8, 1.0

MIN_WARMUP, MIN_STEPS = 2, 5


class PeerError(Exception):
    """A bad input or an unusable environment: one clear line, exit status 1."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def skip(prog: str, msg: str) -> None:
    """What a measurement needs is missing here (torch, DeepSpeed, a binary): exit 77, CTest's skip."""
    print(f"{prog}: skipped: {msg}", file=sys.stderr)
    sys.exit(77)
