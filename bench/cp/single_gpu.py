"""The local kernel alone over the whole mask on one GPU: the reference every CP strategy is
held to at cp 1 (same inputs, same local kernel path, same timing, in the same run)."""
from __future__ import annotations

import torch

from magi_attention.common import AttnRange

from .base import CPStrategy
from .local_kernel import make_local_mask


class _KernelFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, strategy):
        out, lse = strategy.kernel.fwd(q, k, v, strategy.local_mask)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.strategy = strategy
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        grads = ctx.strategy.kernel.bwd(dout, q, k, v, out, lse, ctx.strategy.local_mask)
        if grads is None:  # an empty mask: no gradient anywhere
            grads = (torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v))
        return (*grads, None)


class SingleGPU(CPStrategy):
    """No context parallelism: one rank holds every token and calls the local kernel once with
    the global mask (no merge, no cast, no communication). cp_size 1 only. No knobs."""

    name = "single_gpu"

    @classmethod
    def _check(cls, mask, num_heads_q, num_heads_kv, cp_size, **knobs):
        if cp_size != 1:
            return f"the single-GPU kernel runs at cp_size 1 only (got {cp_size})"
        return None

    def _build(self) -> None:
        self.layouts = [[AttnRange(0, self.mask.seqlen)]]
        self.local_mask = make_local_mask(list(self.mask.slices))

    def attention(self, q, k, v):
        """See ``CPStrategy.attention``."""
        return _KernelFunc.apply(q, k, v, self)
