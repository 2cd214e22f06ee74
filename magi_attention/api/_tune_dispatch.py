"""``dispatch_alg="timed"``: equal token shares ("auto") against unequal ones (unequal_runs), each
key built whole and its forward and backward timed here, communication included; the faster kept.

Where one heavy document fills about a rank's share, equal shares must split it between ranks,
and the split half's keys travel in every step; unequal_runs keeps it whole on one rank, as
HybridCP places it, and then casts almost nothing. On 2 H200s at 16k tokens a GPU that placement
is what beat magi's equal shares on the document masks, while at cp 4, at 64k and on full or
causal masks the equal shares were as fast or faster. No cost model of tiles decided it (off by
4-18% per rank where the placements differ by 2-12%), so the key times both, the way it times
the cut by keys.

The time weighs attention alone: under unequal shares the rest of a model layer (projections,
MLP) runs on unequal shares too, which this timing cannot see. Hence it is opt-in, and unequal
shares are kept only where they are faster by more than MIN_GAIN. The choice is kept per process
for the same mask and shapes (``GroupChoices``); each candidate key's own timed choices (cut,
balance) are kept under the candidate's name, so a later key built for either costs nothing
more.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from ._timed_choices import GroupChoices
from ._tune_cut import _Clock, shard_inputs

CANDIDATES = ("auto", "unequal_runs")
# unequal_runs cuts on chunks this fine where the sequence allows (configs/cp/magi_unequal.yaml:
# at 128 tokens the 8192-token document of causal_document went to its rank with 128 tokens of
# its neighbours and ran 0.94x HybridCP's forward; at 32 it holds the document alone)
UNEQUAL_CHUNK = 32
# equal shares are kept unless unequal ones are faster by more than this (noise, and the
# unequal rest of the layer the timing does not see)
MIN_GAIN = 0.02
ROUNDS = 3  # rounds of both candidates in turn; each keeps its fastest forward and backward
# timed choices per process group, by signature: (algorithm, {algorithm: seconds a step})
_CHOSEN = GroupChoices()


def candidate_chunks(chunk_size: int, cp_size: int, total_seqlen: int) -> dict[str, int]:
    """The chunk size each candidate is solved on: "auto" the one asked for, unequal_runs
    UNEQUAL_CHUNK where that is finer and divides the sequence into cp_size equal parts."""
    fine = UNEQUAL_CHUNK if (UNEQUAL_CHUNK < chunk_size
                             and total_seqlen % (cp_size * UNEQUAL_CHUNK) == 0) else chunk_size
    return {"auto": chunk_size, "unequal_runs": fine}


def choose_dispatch(seconds: dict[str, float]) -> str:
    """"unequal_runs" where its step beats the equal shares' by more than MIN_GAIN, else
    "auto"."""
    return "unequal_runs" if seconds["unequal_runs"] < seconds["auto"] * (1 - MIN_GAIN) \
        else "auto"


def resolve_dispatch(build: Callable, chunk_size: int, cp_size: int, total_seqlen: int, group,
                     device: torch.device, shape, dtype: torch.dtype, signature: tuple):
    """The key of the faster candidate: ``build(algorithm, chunk_size)`` makes a candidate's
    key; its runtime gets ``dispatch_seconds`` ({candidate: seconds of a forward + backward,
    the slowest rank's}; None at cp 1, where the "auto" key is returned untimed). Every rank
    builds and times alike, so the collectives match."""
    if cp_size < 2:  # one rank holds every token either way: nothing to choose or time
        return build("auto", chunk_size)
    chunks = candidate_chunks(chunk_size, cp_size, total_seqlen)
    built: dict = {}

    def timed() -> tuple[str, dict[str, float]]:
        for alg in CANDIDATES:
            built[alg] = build(alg, chunks[alg])
        seconds = step_seconds(built, device, shape, dtype)
        return choose_dispatch(seconds), seconds
    chosen, seconds = _CHOSEN.get_or_time(group, (signature, str(device)), timed)
    key = built.get(chosen) or build(chosen, chunks[chosen])
    key.runtime.dispatch_seconds = seconds
    return key


def step_seconds(keys: dict, device: torch.device, shape, dtype: torch.dtype
                 ) -> dict[str, float]:
    """Seconds of each key's forward + backward on random tensors of its shard's shapes, the
    slowest rank's, the fastest of ROUNDS rounds taken in turn (both candidates under the same
    moment's clocks)."""
    clock = _Clock(next(iter(keys.values())).groups.cp_group, device, min_iters=2)
    steps = {alg: _steps(key.runtime, device, shape, dtype) for alg, key in keys.items()}
    best: dict[tuple[str, str], float] = {}
    for _ in range(ROUNDS):
        for alg, (fwd, bwd) in steps.items():
            for direction, fn in (("fwd", fwd), ("bwd", bwd)):
                t = clock.seconds(fn, (alg, direction))
                best[alg, direction] = min(t, best.get((alg, direction), t))
    return {alg: best[alg, "fwd"] + best[alg, "bwd"] for alg in keys}


def _steps(runtime, device: torch.device, shape, dtype: torch.dtype
           ) -> tuple[Callable, Callable]:
    """(forward, backward) of ``runtime`` on random q, k, v, dout of this rank's shard."""
    q, k, v, dout = shard_inputs(runtime, device, shape.num_heads_q, shape.num_heads_kv,
                                 shape.head_dim, dtype)
    out, lse, saved = runtime.forward_saving(q, k, v)
    return (lambda: runtime.forward_saving(q, k, v),
            lambda: runtime.backward(dout, q, k, v, out, lse, saved))


__all__ = ["CANDIDATES", "choose_dispatch", "candidate_chunks", "resolve_dispatch"]
