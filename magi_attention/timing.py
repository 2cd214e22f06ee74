"""What precedes a timing on the GPU (the key's timed choices, the benchmark's timings).

    >>> from magi_attention.timing import settle
    >>> settle()          # then time
"""
from __future__ import annotations

import gc
import time

import torch

__all__ = ["SETTLE_S", "settle"]

# The host idles at least this long before a timing on CUDA. On 2 H200s a magi forward timed
# right after another magi key's backward ran up to 14% slower unless the host first idled:
# 100 ms removed it, 20 ms a third of it; a full garbage collection (~160 ms in the benchmark's
# processes) removed it by its pause alone, as it found no garbage.
SETTLE_S = 0.1


def settle(min_s: float = SETTLE_S) -> None:
    """Before a timing: collect garbage, then, on CUDA, idle until ``min_s`` has passed since
    the collection began (a process whose collection is quick still pauses that long)."""
    start = time.perf_counter()
    gc.collect()
    if torch.cuda.is_available():
        time.sleep(max(0.0, min_s - (time.perf_counter() - start)))
