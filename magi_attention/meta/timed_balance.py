"""balanced_runs' cuts moved by measured kernel time (``OverlapConfig(balance="timed")``).

The models that cut balanced_runs (area; at cp 2 also dispatch_choice's tile model) miss what a
rank's kernel costs by 4-18%, and the slowest rank sets the step: at cp 4, 16k tokens a GPU,
full_document, the four ranks' Triton backwards ran 27.1-30.7 ms on one H100 for areas within
1.8% of each other. Measuring is cheap
next to a training run, so here each rank's kernel time (forward + backward, its own mask,
``rank_seconds``) is measured, every chunk weighs its area times the measured time per cell of
the rank that held it, the mirror DP cuts again on those weights, and the new layout is measured
in turn; the layout whose slowest rank measured fastest is kept. A chunk keeps its time per cell
when it moves: that is a property of its rows (its documents' lengths, its partial tiles), which
is what lets one measurement steer the next cut. Every rank holds the same tokens as before
(``per_bucket`` chunks, two runs), so the rest of a layer stays balanced.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .algorithms import DispatchSolution
from .algorithms.balanced_runs import halving, mirror_runs
from .dispatch import dispatch_meta
from .slice_array import SliceArray, chunk_areas

ITERATIONS = 3  # re-cuts after the first measurement (each one measures one more layout)
# a re-cut replaces the layout kept only where its slowest rank measured this much faster: the
# timings' own noise (4 x H200, full_document: a re-cut 0.02% "faster" than the first)
MIN_GAIN = 0.01


def rebalance_runs(slices: SliceArray, solved, solve: Callable,
                   rank_seconds: Callable[[object], Sequence[float]],
                   iterations: int = ITERATIONS):
    """(the solve whose slowest rank measured fastest, by ``MIN_GAIN`` over the one kept before
    it, [per-rank seconds of each layout measured, in order]). ``solved``: balanced_runs'
    DispatchSolve (solver.solve_for_dispatch); ``solve(dispatch)`` makes the DispatchSolve of
    another dispatch; ``rank_seconds(solve)``
    measures every rank's kernel on its mask under that solve and returns the same list on every
    rank (a collective: every rank evaluates the same layouts in the same order)."""
    dispatch = solved.dispatch
    cp, base = dispatch.cp_size, dispatch.chunk_size
    step = halving(base)  # the finest cut: half chunks where they stay a 128-row tile
    fine = base // step
    areas = chunk_areas(slices, dispatch.total_seqlen, fine)
    per_bucket = len(areas) // cp
    buckets = [sorted(c * step + i for c in dispatch.chunks_of(r) for i in range(step))
               for r in range(cp)]
    seen = {_frozen(buckets)}
    best_time, best, history = float("inf"), solved, []
    current = solved
    for i in range(iterations + 1):
        times = [float(t) for t in rank_seconds(current)]
        history.append(times)
        if max(times) < best_time * (1 - MIN_GAIN) or i == 0:
            best_time, best = max(times), current
        if i == iterations:
            break
        buckets = mirror_runs(chunk_weights(areas, buckets, times), cp, per_bucket)
        layout = _frozen(buckets)
        if layout in seen:  # the weights lead back to a layout already measured
            break
        seen.add(layout)
        current = solve(dispatch_meta(areas, dispatch.total_seqlen, cp, fine,
                                      DispatchSolution(layout)))
    return best, history


def chunk_weights(areas: np.ndarray, buckets: Sequence[Sequence[int]],
                  seconds: Sequence[float]) -> np.ndarray:
    """Each chunk's area times the measured seconds per cell of the rank that holds it, so a
    rank's chunks weigh its measured time in all."""
    weights = np.zeros(len(areas), dtype=np.float64)
    for chunks, t in zip(buckets, seconds):
        chunks = list(chunks)
        area = float(areas[chunks].sum())
        if area > 0:
            weights[chunks] = areas[chunks] * (t / area)
    return weights


def _frozen(buckets) -> tuple:
    return tuple(tuple(b) for b in buckets)


__all__ = ["chunk_weights", "rebalance_runs"]
