"""peer_data.py: the peers' data, llm.c batching over a flat uint32 token file or
synthetic tokens (common.py re-exports it). numpy and torch are imported where used.
"""

from __future__ import annotations

import os
from typing import Optional

from .peer_base import PeerError


class TokenBatches:
    """llm.c batching: each micro-batch reads the next B*T+1 tokens; row j's
    inputs are tokens [jT, jT+T) of that window and its targets the same shifted
    by one; the cursor advances by B*T, and when fewer than B*T+1 tokens remain
    it restarts at 0. An id >= vocab_size is an error.

    path=None (or "synthetic"): tokens drawn uniformly from [0, vocab) with a
    seeded generator, windowed the same way (each window fresh)."""

    def __init__(self, path: Optional[str], batch: int, seq_len: int, vocab_size: int,
                 seed: int = 0):
        import numpy as np
        self.B, self.T, self.V = int(batch), int(seq_len), int(vocab_size)
        if self.B < 1 or self.T < 1:
            raise PeerError("--batch and --seq-len must be >= 1")
        self.cursor = 0
        self.path = None if path in (None, "", "synthetic") else path
        if self.path is None:
            self.rng = np.random.default_rng(seed)
            self.tokens = None
            return
        try:
            size = os.path.getsize(self.path)
        except OSError as e:
            raise PeerError("%s: cannot read token file (%s)" % (self.path, e.strerror))
        if size % 4:
            raise PeerError("%s: size %d is not a multiple of 4 (flat uint32 tokens expected)"
                            % (self.path, size))
        n = size // 4
        need = self.B * self.T + 1
        if n < need:
            raise PeerError("%s: %d tokens, a batch needs B*T+1 = %d" % (self.path, n, need))
        self.tokens = np.memmap(self.path, dtype="<u4", mode="r", shape=(n,))

    def next_window(self):
        """The next B*T+1 tokens as an int64 numpy array."""
        import numpy as np
        need = self.B * self.T + 1
        if self.tokens is None:
            return self.rng.integers(0, self.V, size=need, dtype=np.int64)
        if self.cursor + need > len(self.tokens):
            self.cursor = 0
        w = np.asarray(self.tokens[self.cursor:self.cursor + need], dtype=np.int64)
        if w.size and int(w.max()) >= self.V:
            bad = int(np.argmax(w >= self.V))
            raise PeerError("%s: token id %d at index %d >= vocab_size %d"
                            % (self.path, int(w[bad]), self.cursor + bad, self.V))
        self.cursor += self.B * self.T
        return w

    def stage(self, n: int, device=None) -> list:
        """The next `n` batches, made before a timed window (the timing rule,
        harness/resultslib/timing.py): on a CUDA device each is pinned, copied and the
        copies finished here, so that no step of the window makes, pins or copies its data."""
        import torch
        out = [self.next_batch(device) for _ in range(n)]
        if device is not None and str(device).startswith("cuda"):
            torch.cuda.synchronize()
        return out

    def next_batch(self, device=None):
        """(inputs, targets), each a [B, T] int64 torch tensor."""
        import torch
        w = torch.from_numpy(self.next_window())
        x = w[:-1].view(self.B, self.T)
        y = w[1:].view(self.B, self.T)
        if device is not None and str(device) != "cpu":
            x = x.pin_memory().to(device, non_blocking=True)
            y = y.pin_memory().to(device, non_blocking=True)
        return x, y
