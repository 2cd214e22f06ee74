"""calc_attn: distributed attention on dispatched q, k, v."""
from __future__ import annotations

import torch

from ..functional.dist_attn import dist_attn_func
from ..functional.flex_flash_attn import AttnForwardMeta
from .key import DistAttnKey


def calc_attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key: DistAttnKey,
              sink: torch.Tensor | None = None) -> tuple[torch.Tensor, AttnForwardMeta]:
    """Attention of the local q shard over the group's whole k, v under the key's mask.

    q: [shard_seqlen_q, num_heads_q, head_dim] (``dispatch(q, key)``), k/v: [shard_seqlen_kv,
    num_heads_kv, head_dim] (``dispatch(x, key, side="kv")``; under self-attention
    shard_seqlen_kv = shard_seqlen_q); strided views work. ``sink``: fp32 [num_sink,
    num_heads_q] attention-sink logits, replicated on every rank (a parameter of the layer); its
    gradient is summed over ``key.groups.cp_group``. Returns (out [shard_seqlen_q, num_heads_q,
    head_dim], AttnForwardMeta with the local lse [shard_seqlen_q, num_heads_q], sinks
    included); undispatch(out, key) gives the global output. Collective: every rank of the
    group calls it. Differentiable in q, k, v and sink; under torch.compile one custom op each
    way, with no graph break.

    Example:
        >>> sink = torch.nn.Parameter(torch.zeros(1, num_heads_q, device="cuda"))
        >>> out_local, meta = calc_attn(q_local, k_local, v_local, key, sink=sink)
    """
    out, lse = dist_attn_func(q, k, v, key.runtime, sink)
    return out, AttnForwardMeta(lse=lse, max_logits=None)
