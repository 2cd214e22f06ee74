"""Merging partial attention results over disjoint key sets by their log-sum-exp."""
from __future__ import annotations

import functools

import torch


def merge_out_lse(out1: torch.Tensor, lse1: torch.Tensor, out2: torch.Tensor, lse2: torch.Tensor,
                  out_dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Combine (out, lse) of the same query rows over two disjoint key sets.

    out*: [seqlen_q, num_heads, head_dim], lse*: [seqlen_q, num_heads] fp32 (-inf = no keys).
    l = logaddexp(l1, l2); o = o1 exp(l1 - l) + o2 exp(l2 - l). Returns (out in ``out_dtype``,
    lse fp32); rows with no keys on either side stay (0, -inf). On CUDA with Triton the merge is
    one fused pass (``kernels.triton.merge``), else plain torch.
    """
    if out1.is_cuda and _fused_available():
        from .triton.merge import merge_out_lse_fused
        return merge_out_lse_fused(out1, lse1, out2, lse2, out_dtype)
    return merge_out_lse_torch(out1, lse1, out2, lse2, out_dtype)


def merge_out_lse_torch(out1, lse1, out2, lse2, out_dtype=torch.float32):
    """The torch reference of merge_out_lse (CPU, and the oracle of the fused kernel)."""
    lse = torch.logaddexp(lse1, lse2)
    finite = torch.isfinite(lse)
    safe = torch.where(finite, lse, torch.zeros_like(lse))
    w1 = torch.where(finite, torch.exp(lse1 - safe), torch.zeros_like(lse))[..., None]
    w2 = torch.where(finite, torch.exp(lse2 - safe), torch.zeros_like(lse))[..., None]
    return (out1.float() * w1 + out2.float() * w2).to(out_dtype), lse


@functools.cache
def _fused_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True
