"""Merging partial attention results over disjoint key sets by their log-sum-exp."""
from __future__ import annotations

import torch


def merge_out_lse(out1: torch.Tensor, lse1: torch.Tensor, out2: torch.Tensor, lse2: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Combine (out, lse) of the same query rows over two disjoint key sets.

    out*: [seqlen_q, num_heads, head_dim], lse*: [seqlen_q, num_heads] fp32 (-inf = no keys).
    l = logaddexp(l1, l2); o = o1 exp(l1 - l) + o2 exp(l2 - l). Returns (out fp32, lse fp32);
    rows with no keys on either side stay (0, -inf).
    """
    lse = torch.logaddexp(lse1, lse2)
    finite = torch.isfinite(lse)
    safe = torch.where(finite, lse, torch.zeros_like(lse))
    w1 = torch.where(finite, torch.exp(lse1 - safe), torch.zeros_like(lse))[..., None]
    w2 = torch.where(finite, torch.exp(lse2 - safe), torch.zeros_like(lse))[..., None]
    return out1.float() * w1 + out2.float() * w2, lse
