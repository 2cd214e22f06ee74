"""Where a magi call's GPU time goes, without the profiler: marks around the runtime's kernel
calls (``DistAttnRuntime._fwd`` / ``_bwd``), around each collective's ``WorkHandle.wait`` and
around the fused forward's buffer fill (``_fused_kv_start``: the cast issued, the own KV copied
into the buffer beside it) on the calling stream, while installed. On CUDA the marks are
events, so a wait's span is how long the stream stood still for its collective (the cast or
reduce landing after the work before it), plus what the wait itself then runs (group_reduce's
scatter-add), and a kernel call's span its kernels' time; on CPU they are host clock readings
(for the tests).

Session 53: the second key's slow forward is not work left on other streams, the allocator, the
host's launches, the clocks or the queue count (notes/magi_cp.md); this says whether its extra
time is in the attention kernel or in the wait for the cast, per rank, without torch.profiler
(which removed the state in session 50). Session 54: neither; with the fill marked too, every
span averaged over the block's calls is magi's. Session 55's per-call rows (block_probes.py)
found why the averages hid it: only the block's last quarter of calls is slow.
"""
from __future__ import annotations

import contextlib
import time

import torch

from magi_attention.comm import WorkHandle
from magi_attention.functional import DistAttnRuntime


def mark():
    """A point on the current stream (a recorded CUDA event) or, off CUDA, the host clock."""
    if torch.cuda.is_available():
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event
    return time.perf_counter()


def elapsed_ms(start, end) -> float:
    """Milliseconds between two marks (CUDA events must have completed: synchronise first)."""
    if isinstance(start, float):
        return (end - start) * 1e3
    return start.elapsed_time(end)


class StageEvents:
    """Spans of the runtime's kernel calls, collective waits and buffer fills while
    ``installed()``."""

    def __init__(self) -> None:
        self.kernels: list[tuple] = []  # (start, end) marks of each _fwd / _bwd call
        self.waits: list[tuple] = []    # (start, end) marks of each WorkHandle.wait
        self.fills: list[tuple] = []    # (start, end) marks of each _fused_kv_start

    def _spanned(self, fn, spans: list):
        def wrapper(*args, **kwargs):
            start = mark()
            try:
                return fn(*args, **kwargs)
            finally:
                spans.append((start, mark()))
        return wrapper

    @contextlib.contextmanager
    def installed(self):
        """The runtime's _fwd, _bwd, _fused_kv_start and every WorkHandle's wait marked inside
        the block; the originals back after it, also on an error."""
        targets = [(DistAttnRuntime, "_fwd", self.kernels),
                   (DistAttnRuntime, "_bwd", self.kernels), (WorkHandle, "wait", self.waits),
                   (DistAttnRuntime, "_fused_kv_start", self.fills)]
        saved = [(cls, name, getattr(cls, name)) for cls, name, _ in targets]
        try:
            for cls, name, spans in targets:
                setattr(cls, name, self._spanned(getattr(cls, name), spans))
            yield self
        finally:
            for cls, name, fn in saved:
                setattr(cls, name, fn)

    def row(self, calls: int) -> list:
        """[kernel calls, kernel ms a call, waits, wait ms a call, fills, fill ms a call] over
        ``calls`` timed calls (after a synchronise on CUDA), formatted for the csv."""
        n = max(calls, 1)
        out = []
        for spans in (self.kernels, self.waits, self.fills):
            out += [len(spans), f"{sum(elapsed_ms(a, b) for a, b in spans) / n:.4f}"]
        return out
