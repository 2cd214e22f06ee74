"""Ring attention, all-gather variant (Llama 3 style): one all-gather of k, v, local attention of
the local q against every rank's KV, and a reduce-scatter of dk, dv in the backward."""
from __future__ import annotations

import torch

from ._all_gather import all_gather_uneven
from ._reduce_scatter import reduce_scatter_uneven
from ._sharding import doc_ranges, layout_len, local_slices, zigzag_layout
from .base import CPStrategy
from .local_kernel import make_local_mask


def allgather_fwd(q, k, v, strategy: "RingAllGather"):
    """-> (out [Lq, Hq, D] q.dtype, lse fp32, gathered k, v [S, Hkv, D])."""
    if strategy.cp_size == 1:  # nothing to gather: the kernel alone
        out, lse = strategy.kernel.fwd(q, k, v, strategy.local_mask)
        return out, lse, k, v
    kv = torch.cat(all_gather_uneven(torch.stack([k, v], dim=1), strategy.lengths, strategy.group,
                                     strategy.stats, "fwd"))
    k_all, v_all = kv[:, 0].contiguous(), kv[:, 1].contiguous()
    out, lse = strategy.kernel.fwd(q, k_all, v_all, strategy.local_mask)
    return out, lse, k_all, v_all


def allgather_bwd(dout, q, k_all, v_all, out, lse, strategy: "RingAllGather"):
    grads = strategy.kernel.bwd(dout, q, k_all, v_all, out, lse, strategy.local_mask)
    if grads is None:
        grads = (torch.zeros_like(q), torch.zeros_like(k_all), torch.zeros_like(v_all))
    dq, dk_all, dv_all = grads
    if strategy.cp_size == 1:
        return dq, dk_all, dv_all
    # fp32 on the wire, as the ring variants accumulate dk, dv: a sum of cp_size bf16 partials
    dkv = reduce_scatter_uneven(torch.stack([dk_all, dv_all], dim=1).float(), strategy.lengths,
                                strategy.cp_rank, strategy.group, strategy.stats, "bwd")
    return dq, dkv[:, 0].to(k_all.dtype), dkv[:, 1].to(v_all.dtype)


class AllGatherAttnFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, strategy):
        out, lse, k_all, v_all = allgather_fwd(q, k, v, strategy)
        ctx.save_for_backward(q, k_all, v_all, out, lse)
        ctx.strategy = strategy
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k_all, v_all, out, lse = ctx.saved_tensors
        dq, dk, dv = allgather_bwd(dout.contiguous(), q, k_all, v_all, out, lse, ctx.strategy)
        return dq, dk, dv, None


class RingAllGather(CPStrategy):
    """Layout: zigzag as Ring P2P (per document with doc_lens). The gathered KV is kept for the
    backward (no second all-gather). Any shared AttnSlice mask. No knobs."""

    name = "ring_allgather"

    def _build(self) -> None:
        docs = doc_ranges(self.mask.seqlen, self.mask.doc_lens)
        self.layouts = zigzag_layout(docs, self.cp_size)
        self.lengths = [layout_len(layout) for layout in self.layouts]
        gathered = [r for layout in self.layouts for r in layout]
        self.local_mask = make_local_mask(local_slices(list(self.mask.slices),
                                                       self.layouts[self.cp_rank], gathered))

    def attention(self, q, k, v):
        """See ``CPStrategy.attention``."""
        return AllGatherAttnFunc.apply(q, k, v, self)
