"""q, k, v as the strided views a model hands attention, for tests of every backend.

Each layout is one leaf tensor ``base`` and q [S, Hq, D], k and v [S, Hkv, D] as views of it,
so ``base.grad`` holds dq, dk, dv in the caller's layout. A test runs attention on the views and
on ``.contiguous()`` copies of the same views of a clone of ``base``, and compares the outputs
and the two bases' gradients."""
from __future__ import annotations

import torch

# "fused": q|k|v split of a fused [S, Hq + 2 Hkv, D] projection (at Hq == Hkv, the unbind(1)
# of [S, 3, H, D]); "heads_first": a [Hq + 2 Hkv, S, D] tensor split and transposed to
# [S, H, D]; "wide": the first D columns of [S, H, 2 D] (rows twice as long as a head)
LAYOUTS = ("fused", "heads_first", "wide")


def strided_base(layout: str, seqlen: int, num_heads_q: int, num_heads_kv: int, head_dim: int,
                 dtype=torch.float32, device="cpu", seed: int = 0) -> torch.Tensor:
    """The leaf tensor (requiring grad, standard normal from ``seed``) of ``layout``."""
    heads = num_heads_q + 2 * num_heads_kv
    shape = {"fused": (seqlen, heads, head_dim), "heads_first": (heads, seqlen, head_dim),
             "wide": (seqlen, heads, 2 * head_dim)}.get(layout)
    if shape is None:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(*shape, generator=g).to(device=device, dtype=dtype).requires_grad_()


def strided_views(layout: str, base: torch.Tensor, num_heads_q: int, num_heads_kv: int):
    """(q, k, v) views of ``base`` (from ``strided_base``) in ``layout``."""
    split = [num_heads_q, num_heads_kv, num_heads_kv]
    if layout == "heads_first":
        return tuple(t.transpose(0, 1) for t in base.split(split, dim=0))
    views = base.split(split, dim=1)
    if layout == "wide":
        head_dim = base.shape[-1] // 2
        return tuple(t[..., :head_dim] for t in views)
    return views
