"""Context-parallel strategies: one file per strategy, one protocol (``base.CPStrategy``).

    from bench.cp import load_strategy
    cls = load_strategy("ring_p2p")
    reason = cls.supports(mask, num_heads_q, num_heads_kv, cp_size)   # None or why not
    strategy = cls(mask, group, num_heads_q=8, num_heads_kv=8)

Masks. Every strategy computes each local step on the global mask clipped exactly to (its q
rows) x (the KV block in hand), so it is exact for any AttnSlice mask shared by all heads; the
gloo tests check all 16 patterns of bench.masks (per-head block_sparse excepted) for each.

| strategy       | masks                                      | X (supports() gives the reason)       |
|----------------|--------------------------------------------|---------------------------------------|
| ulysses        | any shared mask                            | num_heads_q % cp_size; per-head masks |
| ring_p2p       | any shared mask                            | per-head masks                        |
| ring_allgather | any shared mask                            | per-head masks                        |
| usp            | any shared mask                            | heads % ulysses_degree; per-head      |
| loongtrain     | any shared mask                            | heads % head_parallel_degree; window  |
|                |                                            | not dividing the ring; per-head       |
| hybrid_cp      | masks whose slices stay in one document    | share_question, causal_blockwise;     |
|                | (all but two patterns)                     | cp_size not a power of two; per-head  |
| magi           | any shared mask                            | seqlen % (cp_size * chunk_size);      |
|                |                                            | per-head                              |
| single_gpu     | any shared mask (the cp 1 reference: the   | cp_size != 1; per-head                |
|                | local kernel alone, no CP)                 |                                       |
"""
from __future__ import annotations

import importlib

from .base import CPStrategy
from .local_kernel import LocalKernel

# name -> "module:Class", imported on demand so one broken strategy never stops the suite.
STRATEGIES: dict[str, str] = {
    "ulysses": "bench.cp.ulysses:Ulysses",
    "ring_p2p": "bench.cp.ring_p2p:RingP2P",
    "ring_allgather": "bench.cp.ring_allgather:RingAllGather",
    "usp": "bench.cp.usp:USP",
    "loongtrain": "bench.cp.loongtrain:LoongTrain",
    "hybrid_cp": "bench.cp.hybrid_cp:HybridCP",
    "magi": "bench.cp.magi:MagiAttention",
    "single_gpu": "bench.cp.single_gpu:SingleGPU",
}


def load_strategy(name: str) -> type[CPStrategy]:
    """The strategy class registered as ``name``.

    Raises:
        ValueError: unknown name. ImportError: its module (or a peer library) cannot be imported.
    """
    if name not in STRATEGIES:
        raise ValueError(f"unknown CP strategy {name!r}; known: {', '.join(STRATEGIES)}")
    module, cls = STRATEGIES[name].split(":")
    return getattr(importlib.import_module(module), cls)


__all__ = ["CPStrategy", "LocalKernel", "STRATEGIES", "load_strategy"]
