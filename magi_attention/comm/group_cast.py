"""group_cast: send each local KV range only to the ranks that need it (one all_to_all_v)."""
from __future__ import annotations

from typing import Sequence

import torch

from .all_to_all_v import all_to_all_v
from .args import GroupCollectiveArgs
from .range_ops import range_gather, range_gather_stacked
from .work import WorkHandle, on_stream


def group_cast(x: torch.Tensor | Sequence[torch.Tensor], args: GroupCollectiveArgs, group=None,
               stream=None, range_backend: str = "auto", out: torch.Tensor | None = None
               ) -> WorkHandle:
    """Multicast token ranges of ``x`` to the ranks named by ``args``.

    x: [local_seqlen, *row_shape], or a tuple (k, v) of [local_seqlen, h_i, ...] sent as one
    buffer stacked on dim 1 (gathered straight from each: no stacked copy of the shard). The
    ranges of ``args.send_ranges`` are gathered (on ``stream`` when given) and exchanged;
    ``wait()`` returns the received buffer [args.recv_seqlen, *row_shape], sources in rank
    order (``out`` when given, see all_to_all_v).
    """
    with on_stream(stream):
        if isinstance(x, torch.Tensor):
            send = range_gather(x, args.send_index(x.device), range_backend)
        else:
            send = range_gather_stacked(x, args.send_index(x[0].device), range_backend)
    return all_to_all_v(send, args.send_split_sizes, args.recv_split_sizes, group, stream,
                        name="group_cast", out=out)
