"""A low-precision kernel against the float64 dense oracle, by FlashAttention's tolerance rule.

Per tensor (out, lse, dq, dk, dv, dsink) the kernel's max abs error against dense attention in
fp64 may be at most ERR_FACTOR times the max abs error of plain attention computed in the
inputs' dtype (dense_attention with ``compute_dtype`` bf16/fp16), plus 1e-3 * max|oracle| + 1e-4.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..common import to_dense
from .dense import dense_attention

ERR_FACTOR = 2.0
GRAD_NAMES = ("dq", "dk", "dv", "dsink")


def _run(attend, inputs, dout, names):
    out, lse = attend(*inputs)
    grads = torch.autograd.grad(out, [t for t in inputs if t is not None], dout.to(out.dtype))
    return {"out": out, "lse": lse, **dict(zip(names, grads))}


def dense_errors(attend: Callable, q, k, v, dout, slices: Sequence, sink=None, softcap=0.0
                 ) -> list[str]:
    """What breaks the rule (empty: nothing) for ``attend(q, k, v, sink) -> (out, lse)`` (q, k,
    v may be strided views of a tensor that requires grad; the sink may be None) against the
    dense oracle of the AttnSlice mask ``slices``. Also: no NaN anywhere, lse -inf exactly on
    the rows with no key (and no sink)."""
    seqlen_q, seqlen_k = q.shape[0], k.shape[0]
    mask = to_dense(slices, seqlen_q, seqlen_k, device=q.device)
    names = GRAD_NAMES[:3] + ((GRAD_NAMES[3],) if sink is not None else ())
    got = _run(attend, (q, k, v, sink), dout, names)

    def dense(dtype):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        s = None if sink is None else sink.detach().clone().requires_grad_()
        return _run(lambda *a: dense_attention(*a[:3], mask, softcap=softcap, compute_dtype=dtype,
                                               sink=a[3]), (*leaves, s), dout, names)

    oracle, lowp = dense(torch.float64), dense(q.dtype)
    errors = []
    for name, g in got.items():
        g, r, low = g.double(), oracle[name].double(), lowp[name].double()
        if torch.isnan(g).any():
            errors.append(f"{name} has NaN")
            continue
        if name == "lse":
            empty = torch.isinf(r)
            if not (torch.isinf(g[empty]).all() and (g[empty] < 0).all()):
                errors.append("lse is not -inf on the rows with no key")
            g, r, low = g[~empty], r[~empty], low[~empty]
        if g.numel() == 0:
            continue
        err = (g - r).abs().max().item()
        base = (low - r).abs().max().item()
        tol = ERR_FACTOR * base + 1e-3 * r.abs().max().item() + 1e-4
        if err > tol:
            errors.append(f"{name}: max err {err:.3e} > tol {tol:.3e} (low-precision {base:.3e})")
    return errors


def lowp_inputs(seqlen_q: int, seqlen_k: int, heads: tuple[int, int], head_dim: int, seed: int,
                num_sink: int = 0, dtype=torch.bfloat16, device="cuda"):
    """(q, k, v) in ``dtype`` requiring grad, dout, and an fp32 sink [num_sink, Hq] requiring
    grad (None for num_sink 0), standard normal (the sink times 2) from ``seed``."""
    g = torch.Generator(device=device).manual_seed(seed)

    def make(seqlen, num_heads):
        return torch.randn(seqlen, num_heads, head_dim, device=device, generator=g).to(dtype)

    q, k, v = make(seqlen_q, heads[0]), make(seqlen_k, heads[1]), make(seqlen_k, heads[1])
    dout = make(seqlen_q, heads[0])
    sink = None
    if num_sink:
        sink = (torch.randn(num_sink, heads[0], device=device, generator=g) * 2).requires_grad_()
    return (*(t.requires_grad_() for t in (q, k, v)), dout, sink)
