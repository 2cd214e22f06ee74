"""Hierarchical group_cast on a 2D mesh: inter-node hop, then intra-node hop, then reorder."""
from __future__ import annotations

import torch

from .group_cast import group_cast
from .work import WorkHandle, on_stream


def hier_group_cast(x: torch.Tensor, args, inter_group, intra_group, stream=None,
                    range_backend: str = "auto") -> WorkHandle:
    """Same result as ``group_cast`` with the flat args of the stage (``args``: HierCastArgs).

    Both hops are issued now; on CUDA, hop 2 waits for hop 1 on the side stream (the host does
    not block); on gloo, hop 1 completes before hop 2 is issued.
    """
    with on_stream(stream):
        relay = group_cast(x, args.hop1, inter_group, stream, range_backend).wait()
        hop2 = group_cast(relay, args.hop2, intra_group, stream, range_backend)

    def finish() -> torch.Tensor:
        recv = hop2.wait()
        return recv.index_select(0, args.post_index_tensor(recv.device))

    return WorkHandle(None, finish, hop2.comm_bytes, "hier_group_cast")
