"""Predicted CP step times at any scale: each strategy's own per-rank work and traffic, run
against a rate table of the local kernel (single-GPU rows) and a link model.

    python -m bench.cp.predict hardware=h100 'cp_sizes=[8,16,32,64]'    # rows, figures
    python -m bench.cp.predict.validation                               # against measured cells

How each strategy's step is composed (``baselines``, ``magi_programs``; run by ``schedule``):

- Ulysses: blocking all-to-alls of q, k, v to heads / cp, one kernel over the whole sequence,
  an all-to-all of out back (backward: dout, then dq, dk, dv); nothing overlaps.
- Ring P2P: each step posts the next KV block's exchange, runs the block in hand, merges by lse;
  backward, an fp32 dK/dV buffer travels one step behind the KV, its last hop exposed.
- USP: Ulysses inside groups, then Ring P2P across them on heads / U.
- LoongTrain: as USP, the ring cut into windows: the outer exchange beside a window's steps.
- Ring all-gather: a blocking all-gather of KV, one kernel over all keys; backward, one kernel
  and a blocking fp32 reduce-scatter of dK/dV.
- HybridCP: its placement's levels in turn, each a ring inside its sub-group.
- MagiAttention: the solver's plan per rank: fused (the cast beside the own keys' copy, one
  kernel; backward, one kernel then the reduce of dK/dV), cut by keys (the own keys' kernel
  beside the cast), or staged (stage j + 1's cast beside stage j's kernel; backward: cast
  again, reduces beside the next stage). "auto" choices timed on the GPU are predicted both
  ways, the faster kept.

Every op is exact from the strategies' code (layouts, ring plans, placements, the solver's
meta; tests/bench/cp/predict/test_gloo_traffic.py counts the real runs' bytes and calls);
time comes from the models: a kernel call from its tile counts (``tiles``, ``rates``), an
elementwise pass from HBM bandwidth, a transfer from the link model (``links``), and the order
of posts and waits decides what overlaps (``schedule``).

One job per module: ``problem`` (a cell), ``submask`` (ring step masks), ``ops`` (programs,
areas and bytes), ``baselines`` and ``magi_programs`` (the strategies' programs), ``tiles``
(a call's tile counts), ``rates`` (the rate table), ``links`` (the link model), ``schedule``
(what overlaps what), ``predictor`` (one cell), ``config``, ``sweep`` and ``__main__`` (Hydra
and rows), ``validation``, ``report`` and ``figures``.
"""
from .links import LinkModel, Topology
from .predictor import Models, Prediction, predict_cell
from .rates import RateModel, fit_rate_model

__all__ = ["LinkModel", "Topology", "Models", "Prediction", "predict_cell", "RateModel",
           "fit_rate_model"]
