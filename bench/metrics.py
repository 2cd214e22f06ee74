"""Benchmark arithmetic and measurement: FLOPs from mask area, TFLOPs/s, timing, peak memory.

FLOPs follow the convention of FlashAttention's and MagiAttention's benchmarks: the forward pass is
two matmuls (``Q K^T`` and ``P V``) over the ``area`` unmasked (q, k) cells, each cell costing
``2 * head_dim`` FLOPs per matmul, hence ``4 * area * head_dim`` per head; the backward pass is five
such matmuls, 2.5x the forward. Softmax and masking are not counted.
"""
from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from magi_attention.timing import settle

__all__ = ["attn_flops", "tflops_per_s", "peak_mem_gb", "reset_peak_mem", "time_cuda_ms",
           "gpu_held", "host_us_per_call", "BWD_FWD_RATIO", "DIRECTIONS"]

# Backward does 5 matmuls (recompute S = Q K^T, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q)
# against forward's 2.
BWD_FWD_RATIO = 2.5
_DIRECTION_FACTOR = {"fwd": 1.0, "bwd": BWD_FWD_RATIO, "fwd_bwd": 1.0 + BWD_FWD_RATIO}
DIRECTIONS = tuple(_DIRECTION_FACTOR)
_BYTES_PER_GIB = 2**30


def attn_flops(area: float, num_heads_q: int, head_dim: int, batch: int = 1, direction: str = "fwd") -> float:
    """FLOPs of attention over a mask of ``area`` unmasked cells.

    Args:
        area: number of (q, k) pairs that attend, e.g. ``S * (S + 1) / 2`` for causal at seqlen S.
        num_heads_q: query heads (KV heads do not change the matmul FLOPs).
        head_dim: per-head dimension.
        batch: batch size.
        direction: ``"fwd"`` (4 * area * batch * num_heads_q * head_dim), ``"bwd"`` (2.5x fwd),
            or ``"fwd_bwd"`` (3.5x fwd).

    Returns:
        FLOPs as a float.

    Raises:
        ValueError: unknown direction, or a negative argument.

    Example:
        >>> attn_flops(4096 * 4097 / 2, num_heads_q=64, head_dim=128)
        274945015808.0
    """
    if direction not in _DIRECTION_FACTOR:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    for name, value in (("area", area), ("num_heads_q", num_heads_q), ("head_dim", head_dim), ("batch", batch)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    fwd = 4.0 * area * batch * num_heads_q * head_dim
    return fwd * _DIRECTION_FACTOR[direction]


def tflops_per_s(flops: float, runtime_ms: float, cp_size: int = 1) -> float:
    """Throughput in TFLOPs/s per GPU: ``flops / (runtime_ms * 1e-3) / 1e12 / cp_size``.

    ``flops`` is the whole (global) attention's FLOPs; dividing by ``cp_size`` gives the per-GPU
    rate of a context-parallel run, comparable with a single-GPU kernel.

    Raises:
        ValueError: runtime_ms <= 0 or cp_size < 1.
    """
    if not runtime_ms > 0:
        raise ValueError(f"runtime_ms must be > 0, got {runtime_ms}")
    if cp_size < 1:
        raise ValueError(f"cp_size must be >= 1, got {cp_size}")
    return flops / (runtime_ms * 1e-3) / 1e12 / cp_size


def _on_cuda(device: Any) -> bool:
    if not torch.cuda.is_available():
        return False
    return device is None or torch.device(device).type == "cuda"


def peak_mem_gb(device: Any = None) -> float | None:
    """Peak memory allocated by torch on a CUDA device since the last reset, in GiB (2**30 bytes).

    Args:
        device: a CUDA device (index, string or torch.device); None means the current one.

    Returns:
        GiB as float, or None when CUDA is unavailable or ``device`` is not a CUDA device.
    """
    if not _on_cuda(device):
        return None
    return torch.cuda.max_memory_allocated(device) / _BYTES_PER_GIB


def allocated_gb(device: Any = None) -> float:
    """Memory torch holds allocated on a CUDA device now, in GiB; 0.0 without CUDA."""
    if not _on_cuda(device):
        return 0.0
    return torch.cuda.memory_allocated(device) / _BYTES_PER_GIB


def reset_peak_mem(device: Any = None) -> None:
    """Reset the peak counter read by :func:`peak_mem_gb`; a no-op without CUDA."""
    if _on_cuda(device):
        torch.cuda.reset_peak_memory_stats(device)


def _time_cpu_ms(fn: Callable[[], Any], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def _time_cuda_events_ms(fn: Callable[[], Any], repeat: int) -> list[float]:
    # One event pair per call, read after a single synchronize, so timing adds no host stalls
    # between calls. Events time the current stream only; fn must launch its work there.
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeat)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def time_cuda_ms(fn: Callable[[], Any], warmup: int, repeat: int, warmup_ms: float = 0.0,
                 agree: Callable[[int], int] | None = None, collect: bool = True) -> float:
    """Median runtime of ``fn()`` in milliseconds.

    With CUDA available, each call is bracketed by CUDA events on the current stream (after
    the untimed warm-up calls and a synchronize); without CUDA it falls back to
    ``time.perf_counter`` around each call, so CPU tests can use it.

    Args:
        fn: zero-argument callable doing the work to time.
        warmup: untimed calls first (>= 0).
        repeat: timed calls (>= 1).
        warmup_ms: then more untimed calls, back to back, until about this much time has
            passed (sized from one call timed alone; at most ``MAX_WARMUP_CALLS``): a GPU
            that idled before the cell runs its first calls at boost clocks, which a
            power-limited GPU cannot hold under load.
        agree: maps this process's count of those extra calls to the one every process uses
            (e.g. the max over a process group), where ``fn`` is a collective whose calls must
            match on every rank.
        collect: settle first (``magi_attention.timing.settle``: a garbage
            collection, then on CUDA at least 100 ms idle): 2 x H200, magi's forward timed
            right after another magi key's backward ran 5-20% longer without it; with no
            garbage to free, a 100 ms pause alone cured it, so it is the idle that counts
            (docs/design/timing_method.md).

    Returns:
        The median of the ``repeat`` timings, in ms.

    Raises:
        ValueError: warmup < 0, repeat < 1 or warmup_ms < 0.

    Example:
        >>> time_cuda_ms(lambda: sum(range(1000)), warmup=1, repeat=5) > 0
        True
    """
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    if warmup_ms < 0:
        raise ValueError(f"warmup_ms must be >= 0, got {warmup_ms}")
    use_cuda = torch.cuda.is_available()
    if collect:
        settle()
    for _ in range(warmup):
        fn()
    if warmup_ms > 0:
        _warm_for(fn, warmup_ms, use_cuda, agree)
    if use_cuda:
        torch.cuda.synchronize()
        return statistics.median(_time_cuda_events_ms(fn, repeat))
    return statistics.median(_time_cpu_ms(fn, repeat))


MAX_WARMUP_CALLS = 10_000


def _warm_for(fn: Callable[[], Any], warmup_ms: float, use_cuda: bool,
              agree: Callable[[int], int] | None) -> None:
    """One call timed alone sizes the rest, which then run back to back (as the timed calls
    will), so the GPU's clocks settle at the load being measured."""
    if use_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if use_cuda:
        torch.cuda.synchronize()
    per_call_ms = max((time.perf_counter() - start) * 1e3, 1e-3)
    extra = max(0, min(MAX_WARMUP_CALLS, math.ceil(warmup_ms / per_call_ms) - 1))
    for _ in range(agree(extra) if agree is not None else extra):
        fn()


@contextlib.contextmanager
def gpu_held():
    """While inside, a sleep kernel (~1 s of GPU time) holds the GPU, so work launched there only
    queues and host time is measured alone; waits for the GPU on leaving. Without CUDA: no-op."""
    on_cuda = torch.cuda.is_available()
    if on_cuda:
        torch.cuda.synchronize()
        torch.cuda._sleep(int(2e9))
    try:
        yield
    finally:
        if on_cuda:
            torch.cuda.synchronize()


def host_us_per_call(fn: Callable[[], Any], calls: int = 20) -> float:
    """Host time per call of ``fn()`` in microseconds, inside :func:`gpu_held`, so no call waits
    for the device (the launch path's own cost). Without CUDA: plain wall time per call."""
    with gpu_held():
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - start) / calls * 1e6


def host_profile(fn: Callable[[], Any], calls: int = 20, top: int = 15,
                 orders: tuple[str, ...] = ("tottime",)) -> str:
    """cProfile of ``calls`` calls of ``fn()`` inside :func:`gpu_held` (as for
    :func:`host_us_per_call`): the ``top`` functions by each of ``orders`` (pstats sort keys)."""
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    with gpu_held():
        prof.enable()
        for _ in range(calls):
            fn()
        prof.disable()
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    for order in orders:
        stats.sort_stats(order).print_stats(top)
    return text.getvalue()
