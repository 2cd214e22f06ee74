"""The MASKS.md definitions as dense predicates, for tests: independent of the slice generators."""
from __future__ import annotations

from typing import Callable

import torch

from .mask import Mask
from .registry import PATTERNS


def reference_predicate(mask: Mask) -> Callable[..., torch.Tensor]:
    """The plain definition of ``mask`` as a vectorised predicate over broadcastable int64 tensors.

    Returns ``(q_idx, k_idx) -> bool`` for masks shared by all heads, and
    ``(h, q_idx, k_idx) -> bool`` (h the KV head) for block_sparse and var_block_sparse. It uses
    the same random draws as the generator (from ``mask.params``), not its slices.
    """
    return PATTERNS[mask.name].reference(mask.seqlen, mask.doc_lens, mask.params)


def reference_dense(mask: Mask, device: str | torch.device = "cpu") -> torch.Tensor:
    """Dense bool mask from the definition: ``[S, S]``, or ``[num_mask_heads, S, S]`` when the
    mask has head_slices (matching ``convert.to_dense``)."""
    idx = torch.arange(mask.seqlen, device=device)
    pred = reference_predicate(mask)
    if not PATTERNS[mask.name].per_head:
        return pred(idx[:, None], idx[None, :])
    dense = torch.stack([pred(torch.tensor(h, device=device), idx[:, None], idx[None, :])
                         for h in range(mask.num_mask_heads)])
    return dense if mask.head_slices is not None else dense[0]
