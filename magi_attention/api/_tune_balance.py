"""``OverlapConfig(balance="timed")``: balanced_runs' cuts moved by each rank's measured kernel
time, at key time (meta.timed_balance says why and how).

Each layout is measured by every rank at once, each on its own GPU and its own mask: the local
kernel's forward and backward over the rank's stage masks on random tensors of their shapes (no
communication: what the cut moves is compute), the fastest of ``ROUNDS`` timings; the ranks'
times are then gathered, so every rank sees the same list and re-cuts alike. Up to four
layouts at (forward + backward) x 8 calls each (3 where a step takes >= 0.1 s): about a second
at 16k tokens a rank, ~15 s at 64k; so it is asked for (the benchmark's magi asks), and its
choice is kept per process for the same mask and shapes, as the timed cut's is.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ..functional import load_backend
from ..meta import MagiMeta, OverlapConfig, SliceArray
from ..meta.dispatch_choice import rank_stage_masks
from ..meta.solver import solve_for_dispatch
from ..meta.timed_balance import rebalance_runs
from ..timing import settle
from ._timed_choices import GroupChoices

ROUNDS = 3  # timings of each rank's kernels per layout; each keeps its fastest
CALLS = 2  # forward + backward steps per timing
LONG_STEP_S = 0.1  # a step this long is timed one step at a time (64k tokens a rank: ~1-2 s),
LONG_ROUNDS = 2  # ... this many times
# Every layout of a key is timed by the recipe its first layout chose: one step timed alone
# spreads by up to 16% (one H100), so where the first layout's step (98 ms, FA4
# causal, 16k a GPU, cp 4) kept the fastest of four timings and the re-cuts' (past 0.1 s) were
# timed once, every re-cut lost (105-121 ms)

# timed choices per process group, by signature: (dispatch, per-layout seconds)
_CHOSEN = GroupChoices()


def resolve_balance(overlap: OverlapConfig, meta: MagiMeta, slices: SliceArray, shape, group,
                    rank: int, device: torch.device, kernel: str, dtype: torch.dtype,
                    softmax_scale: float | None, softcap: float, signature: tuple
                    ) -> tuple[MagiMeta, list[list[float]] | None]:
    """(meta, per-rank seconds of each layout measured, or None where nothing was timed):
    ``meta`` itself unless balance is "timed", its dispatch is balanced_runs and the ranks run
    on CUDA; else the meta of the layout whose slowest rank measured fastest."""
    if (overlap.balance != "timed" or meta.algorithm != "balanced_runs"
            or meta.dispatch.cp_size < 2 or device.type != "cuda"):
        return meta, None
    solve = lambda d: solve_for_dispatch(slices, d, shape, overlap, kernel)  # noqa: E731
    solved: list = []  # the best layout's solve, where this call timed it

    def timed() -> tuple:
        measure = _rank_seconds(group, rank, device, kernel, shape, dtype, softmax_scale, softcap)
        best, history = rebalance_runs(slices, solve(meta.dispatch), solve, measure)
        solved.append(best)
        return best.dispatch, history
    dispatch, history = _CHOSEN.get_or_time(group, signature, timed)
    return _meta_of(solved[0] if solved else solve(dispatch), rank, meta), history


def _meta_of(solved, rank: int, meta: MagiMeta) -> MagiMeta:
    return MagiMeta(solved.dispatch, solved.table, solved.runtime(rank), solved.stage_plan,
                    meta.algorithm, meta.choice)


def _rank_seconds(group, rank, device, kernel, shape, dtype, softmax_scale, softcap):
    """rank_seconds for rebalance_runs: this rank's kernels timed on its masks, gathered; each
    stage mask timed by the recipe (long or not) its first layout chose."""
    module = load_backend(kernel)
    scale = softmax_scale if softmax_scale is not None else shape.head_dim ** -0.5
    recipes: dict[int, bool] = {}

    def measure(solved) -> list[float]:
        seconds = 0.0
        masks = [a for a in rank_stage_masks(solved.runtime(rank)) if a.num_slices]
        for i, attn in enumerate(masks):
            t, recipes[i] = _step_seconds(module, attn, shape, device, dtype, scale, softcap,
                                          recipes.get(i))
            seconds += t
        return _gathered(seconds, group, device)
    return measure


def _step_seconds(module, attn, shape, device, dtype, scale: float, softcap: float,
                  long: bool | None) -> tuple[float, bool]:
    """``fastest`` of one forward + backward of the kernel over ``attn``."""
    g = torch.Generator(device=device).manual_seed(0)
    make = lambda rows, h: torch.randn(rows, h, shape.head_dim, device=device,  # noqa: E731
                                       dtype=dtype, generator=g)
    q, dout = make(attn.seqlen_q, shape.num_heads_q), make(attn.seqlen_q, shape.num_heads_q)
    k, v = make(attn.seqlen_k, shape.num_heads_kv), make(attn.seqlen_k, shape.num_heads_kv)

    def step():
        out, lse, _ = module.fwd(q, k, v, attn.plan, scale, softcap, False)
        module.bwd(dout, q, k, v, out, lse, attn.plan, scale, softcap, False)
    return fastest(step, _timed, long)


def fastest(step, timed, long: bool | None = None) -> tuple[float, bool]:
    """(the fastest of several timings of ``step`` after one warm call (compiles, plans,
    allocator), the recipe used): ``timed(step, calls)`` gives seconds a call; ``long`` picks
    LONG_ROUNDS timings of one step, else the first timing and ROUNDS more of CALLS steps;
    None: long where the first timing takes LONG_STEP_S or more. It settles first
    (``magi_attention.timing.settle``; ``_tune_cut._Clock.seconds`` says why)."""
    settle()
    step()
    first = timed(step, 1)
    if long is None:
        long = first >= LONG_STEP_S
    more = ([timed(step, 1) for _ in range(LONG_ROUNDS - 1)] if long
            else [timed(step, CALLS) for _ in range(ROUNDS)])
    return min([first, *more]), long


def _timed(step, calls: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def _gathered(value: float, group, device: torch.device) -> list[float]:
    on = device if dist.get_backend(group) == "nccl" else "cpu"
    t = torch.tensor([value], dtype=torch.float64, device=on)
    out = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, t, group=group)
    return [float(x.item()) for x in out]
