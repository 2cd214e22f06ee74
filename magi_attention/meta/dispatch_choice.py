"""The default dispatch ("auto"): min_heap, or a dispatch of contiguous runs (sequential: one per
rank; balanced_runs: two per rank, cut for balance) where the local kernel's native form makes
it faster. Decided once, at key time.

min_heap balances area best but scatters 512-token chunks, so a document cut between ranks
leaves each rank's mask outside FA4's native (varlen) forms: the FA4 backend then runs its
block-sparse path with a bitmap on every partial 128 x 128 tile. Sequential keeps each rank one
contiguous run of the sequence; with the fused KV buffer in global order (``runtime_meta``), a
rank's document mask stays a varlen staircase and FA4 runs it natively, at the cost of the area
imbalance of the documents' lengths; balanced_runs keeps that (two runs per rank, still in
global order in the buffer) and cuts the runs for balance. The cost model, per candidate:

    predicted = exposed communication (overlap solver)
                + (1 + bwd factor) * max over ranks of effective area / compute rate

(equal predictions go to the runs: ``TIE_ORDER``)

where, on FA4, a stage mask it runs natively counts its area, and any other counts its area
plus PARTIAL_TILE_COST full tiles per partial tile; on the Triton kernel, which computes every
tile it touches whole, a mask counts its touched 128 x 64 tiles (min_heap's 512-token pieces
cut the causal diagonals of documents into more of them). For any other kernel (the CPU
reference) "auto" is min_heap without evaluation.

balanced_runs cuts for equal area, but a kernel's time is not its area: FA4 pays per 128 x 128
tile it visits (a short causal document's diagonal tiles are half empty) and per q tile (loading
Q, the pipeline fill, writing O), ~3.2 tiles' worth (1.52 / 1.62 ms of kernel on the two ranks
of causal_document at 32k, equal area). At cp 2 the cut is
therefore moved by up to ``REFINE_CHUNKS`` chunks to the one whose slower rank the tile model
predicts fastest (Triton: its touched tiles), on chunks of half the size where the sequence
allows (a cut is a dispatch boundary only: ranks still hold two runs each; the key then reports
the finer chunk_size).
"""
from __future__ import annotations

from dataclasses import dataclass

from .algorithms import DispatchSolution
from .algorithms.balanced_runs import halving
from .dispatch import dispatch_meta, solve_dispatch
from .overlap_solver import BWD_COMPUTE_FACTOR, OverlapConfig
from .slice_array import chunk_areas

# The native and the block-sparse (bitmap) FA4 path differ only on partial tiles. H200, 16k
# causal_document: block-sparse / native throughput 0.56 fwd, 0.58 bwd, with partial
# tiles 0.39 of the area (354 partial 128 x 128 tiles over 14.9M cells): 1 / 0.57 = 1 + c * 0.39
# gives c = 1.9 extra full-tile times per partial tile (sliding_window_causal 16k, partial 0.25
# of the area, then predicts 0.68 against the 0.60 / 0.70 measured).
PARTIAL_TILE_COST = 1.9
FA4_TILE = 128
TRITON_TILE = (128, 64)  # the Triton forward's default tile (kernels/triton/configs.py)
EVALUATED_KERNELS = ("fa4", "triton")
CANDIDATES = ("min_heap", "sequential", "balanced_runs")
# Ties go to the contiguous runs: on one causal sequence the Triton tile model counts min_heap
# and balanced_runs alike, yet min_heap's 512-token pieces ran slower (4 H200s, cp 4, 16k a GPU,
# interleaved: forward 1.078x, backward 1.021x for balanced_runs; cp 2: 1.00x / 1.046x;
# full: equal), as its rank's mask is one slice per piece.
# Between the two run layouts the order is the old one (sequential first, e.g. on windows).
TIE_ORDER = ("sequential", "balanced_runs", "min_heap")
# FA4 forward on an H200 (64 q heads, head_dim 128), fit to the kernel alone on both ranks of
# causal_document 32k at cp 2: time = a * key tiles + b * q tiles
FA4_US_PER_TILE = 0.68
FA4_US_PER_Q_TILE = 2.2
REFINE_CHUNKS = 4  # balanced_runs' cut is tried this many chunks either way (cp 2)


@dataclass(frozen=True)
class DispatchChoice:
    """The algorithm "auto" ran and the prediction (fwd + bwd, us) of every candidate."""

    algorithm: str
    predicted_us: dict[str, float]


def effective_area(attn, kernel: str = "fa4") -> float:
    """A stage mask's area in full-tile-equivalent cells on the ``kernel`` backend."""
    if kernel == "triton":
        from ..kernels.block_sparse import plan_for  # host-only tile plan, cached in the plan
        plan = plan_for(attn.plan, *TRITON_TILE)
        return float(plan.q_tile_kt.numel() * TRITON_TILE[0] * TRITON_TILE[1])
    from ..kernels.fa4.cost import path_cost_terms  # host-only; FA4 is not imported
    area, _, partial = path_cost_terms(attn.plan, FA4_TILE, FA4_TILE)
    return float(area + PARTIAL_TILE_COST * partial * FA4_TILE * FA4_TILE)


def rank_stage_masks(runtime) -> list:
    """The masks a rank's kernels run: the fused one (its row split's parts where it is cut),
    or the host and every remote stage."""
    if runtime.fused_split is not None:
        return list(runtime.fused_split.stage_args())
    if runtime.fused is not None:
        return [runtime.fused]
    return [runtime.host, *(stage.attn for stage in runtime.stages)]


def tile_time(attn, kernel: str) -> float | None:
    """The tile model's time of one stage mask (FA4: us, only where FA4 runs it natively, else
    None; Triton: its touched tiles, a relative count)."""
    if kernel == "triton":
        return effective_area(attn, "triton")
    from ..kernels.fa4.cost import native_tile_counts  # host-only; FA4 is not imported
    counts = native_tile_counts(attn.plan, FA4_TILE, FA4_TILE)
    if counts is None:
        return None
    return sum(FA4_US_PER_TILE * tiles + FA4_US_PER_Q_TILE * q_tiles for tiles, q_tiles in counts)


def slowest_tile_time(runtimes, kernel: str) -> float | None:
    """The tile model's time of the slowest rank (None where a mask is outside the model)."""
    worst = 0.0
    for runtime in runtimes:
        times = [tile_time(a, kernel) for a in rank_stage_masks(runtime) if a.num_slices]
        if any(t is None for t in times):
            return None
        worst = max(worst, sum(times))
    return worst


def refine_cut(slices, total_seqlen: int, chunk_size: int, shape, overlap: OverlapConfig,
               kernel: str, solved, runtimes, solve):
    """At cp 2, balanced_runs' mirror (rank 0: chunks [a, a + n); rank 1 the rest) with ``a``
    moved by up to ``REFINE_CHUNKS`` chunks, in steps of half a chunk where the sequence allows,
    to the cut of the fastest slower rank by the tile model; (solved, runtimes) of the best (the
    given ones when nothing beats them; ``solve`` as choose_and_solve's). The tile model alone
    decides: weighing the exposed cast beside it moved FA4's causal_document 16k cut onto a
    document edge and measured a slower forward."""
    dispatch = solved.dispatch
    own = dispatch.chunks_of(0)
    n = len(own)
    best = slowest_tile_time(runtimes, kernel)
    if dispatch.cp_size != 2 or best is None or list(own) != list(range(own[0], own[0] + n)):
        return solved, runtimes
    step = halving(chunk_size)
    chunk, a0, n = chunk_size // step, own[0] * step, n * step
    total = total_seqlen // chunk
    areas = chunk_areas(slices, total_seqlen, chunk)  # one weighing for every moved cut
    for a in range(max(0, a0 - REFINE_CHUNKS * step),
                   min(total - n, a0 + REFINE_CHUNKS * step) + 1):
        if a == a0:
            continue
        middle = tuple(range(a, a + n))
        outer = tuple(range(a)) + tuple(range(a + n, total))
        moved = dispatch_meta(areas, total_seqlen, 2, chunk, DispatchSolution((middle, outer)))
        cand = solve(slices, moved, shape, overlap, kernel)
        cand_runtimes = [cand.runtime(r) for r in range(2)]
        t = slowest_tile_time(cand_runtimes, kernel)
        if t is not None and t < best:
            best, solved, runtimes = t, cand, cand_runtimes
    return solved, runtimes


def predicted_us(runtimes, exposed_us: float, flops_per_cell: float,
                 overlap: OverlapConfig, kernel: str = "fa4") -> float:
    """Prediction for one candidate from every rank's runtime meta and the exposed
    communication of its stage plan."""
    slowest = max(sum(effective_area(a, kernel) for a in rank_stage_masks(r)) for r in runtimes)
    compute = (1 + BWD_COMPUTE_FACTOR) * slowest * flops_per_cell / (overlap.compute_tflops * 1e6)
    return exposed_us + compute


def choose_and_solve(slices, total_seqlen: int, cp_size: int, chunk_size: int, shape,
                     overlap: OverlapConfig, kernel: str | None, solve):
    """(DispatchChoice, (the chosen candidate's DispatchSolve, every rank's runtime meta)), the
    second None when nothing was evaluated: the candidate with the lowest prediction (on ties,
    the first of ``TIE_ORDER``); min_heap alone when ``kernel`` (the resolved local backend)
    is not one the model knows (``EVALUATED_KERNELS``). ``solve(slices, dispatch, shape,
    overlap, kernel)`` makes one candidate's DispatchSolve (``solver.solve_for_dispatch``,
    which calls here for "auto")."""
    if kernel not in EVALUATED_KERNELS or cp_size == 1:
        return DispatchChoice("min_heap", {}), None
    times, solves = {}, {}
    for name in CANDIDATES:
        dispatch = solve_dispatch(slices, total_seqlen, cp_size, chunk_size, name)
        solved = solve(slices, dispatch, shape, overlap, kernel)
        runtimes = [solved.runtime(r) for r in range(cp_size)]
        if name == "balanced_runs":
            solved, runtimes = refine_cut(slices, total_seqlen, chunk_size, shape, overlap,
                                          kernel, solved, runtimes, solve)
        times[name] = float(predicted_us(runtimes, solved.stage_plan.exposed_us,
                                         shape.flops_per_cell, overlap, kernel))
        solves[name] = (solved, runtimes)
    best = min(CANDIDATES, key=lambda n: (times[n], TIE_ORDER.index(n)))
    return DispatchChoice(best, times), solves[best]

