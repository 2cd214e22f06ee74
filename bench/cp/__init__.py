"""Context-parallel strategies: one file per strategy, one protocol (``base.CPStrategy``).

    from bench.cp import load_strategy
    cls = load_strategy("ring_p2p")
    reason = cls.supports(mask, num_heads_q, num_heads_kv, cp_size)   # None or why not
    strategy = cls(mask, group, num_heads_q=8, num_heads_kv=8)
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
