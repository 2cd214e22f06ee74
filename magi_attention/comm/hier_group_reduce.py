"""Hierarchical group_reduce on a 2D mesh: the transpose of hier_group_cast (intra hop, sum at the
relay, inter hop, sum at the owner)."""
from __future__ import annotations

import torch

from .group_reduce import group_reduce
from .work import WorkHandle, on_stream


def hier_group_reduce(partial: torch.Tensor, out: torch.Tensor, args, inter_group, intra_group,
                      stream=None, range_backend: str = "auto", deterministic: bool = False
                      ) -> WorkHandle:
    """partial: flat group_cast layout [recv_seqlen, ...]; ``wait()`` adds it into ``out``.
    ``deterministic``: both hops sum in source-rank order (``group_reduce``)."""
    with on_stream(stream):
        hop2_layout = partial.index_select(0, args.inverse_post_index_tensor(partial.device))
        relay = torch.zeros((args.hop1.recv_seqlen,) + tuple(partial.shape[1:]),
                            dtype=out.dtype, device=out.device)
        group_reduce(hop2_layout, relay, args.hop2, intra_group, stream, range_backend,
                     deterministic).wait()
        return group_reduce(relay, out, args.hop1, inter_group, stream, range_backend,
                            deterministic)
