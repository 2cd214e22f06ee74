"""CPStrategy: the protocol every context-parallel baseline implements.

A strategy is built collectively by every rank of a CP process group for one mask. It decides a
token layout (which global tokens each rank holds, in which local order), moves q, k, v between
ranks inside ``attention`` and returns this rank's rows of the output, with autograd.

    strategy = RingP2P(mask, group, num_heads_q=8, num_heads_kv=2)
    q_local = strategy.shard(q_global).requires_grad_()      # likewise k, v
    out_local = strategy.attention(q_local, k_local, v_local)
    out_global = strategy.unshard(out_local)                  # tests and result checks
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch
import torch.distributed as dist

from bench.masks import UnsupportedMask

from ._all_gather import all_gather_uneven
from ._sharding import Layout, layout_index, layout_len
from ._stats import CommStats
from .local_kernel import LocalKernel


class CPStrategy(ABC):
    """A context-parallel attention strategy over one CP process group.

    Subclasses set ``name``, implement ``_check`` (the mask and head configurations they cannot
    run), ``_build`` (layout, sub-groups, sub-masks: untimed host work) and ``attention``.

    Args (of every subclass constructor):
        mask: a ``bench.masks.Mask`` (uses ``slices``, ``seqlen``, ``doc_lens``, ``head_slices``).
        group: the CP process group (``None``: the default group); cp_size = its size.
        num_heads_q, num_heads_kv: head counts of the global q and k, v.
        kernel: the local attention kernel (default ``LocalKernel()``: backend "auto").
        **knobs: strategy parameters (e.g. ``ulysses_degree``, ``window_size``), documented on
            each subclass; unknown ones raise TypeError.

    Raises:
        bench.masks.UnsupportedMask: ``supports`` gave a reason.
    """

    name: ClassVar[str]
    knob_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, mask, group=None, *, num_heads_q: int, num_heads_kv: int,
                 kernel: LocalKernel | None = None, **knobs: Any) -> None:
        self.group = group if group is not None else dist.group.WORLD
        self.cp_size = dist.get_world_size(self.group)
        self.cp_rank = dist.get_rank(self.group)
        reason = self.supports(mask, num_heads_q, num_heads_kv, self.cp_size, **knobs)
        if reason is not None:
            raise UnsupportedMask(f"{self.name}: {reason}")
        self.mask, self.num_heads_q, self.num_heads_kv = mask, num_heads_q, num_heads_kv
        self.kernel = kernel if kernel is not None else LocalKernel()
        self.stats = CommStats()
        self.notes = ""  # deviations a result row should carry, e.g. repeated KV heads
        self.layouts: list[Layout] = []
        self._build(**knobs)
        self._index = layout_index(self.layouts[self.cp_rank])
        # NCCL: the first operation on a communicator must involve all its ranks, and a ring
        # of a sub-group (HybridCP) or a p2p exchange would not
        dist.barrier(group=self.group)

    # -- what it can run ---------------------------------------------------------------------
    @classmethod
    def supports(cls, mask, num_heads_q: int, num_heads_kv: int, cp_size: int,
                 **knobs: Any) -> str | None:
        """None if this strategy runs ``mask`` with these head counts on cp_size ranks, else the
        reason (a short sentence for the result table's X). Pure: no communication."""
        unknown = set(knobs) - set(cls.knob_names)
        if unknown:
            raise TypeError(f"{cls.name}: unknown knobs {sorted(unknown)}; known: {list(cls.knob_names)}")
        if getattr(mask, "head_slices", None) is not None:
            return ("per-head mask (head_slices): the local kernel takes one AttnSlice list "
                    "for all heads")
        if num_heads_q % num_heads_kv:
            return f"num_heads_q={num_heads_q} is not a multiple of num_heads_kv={num_heads_kv}"
        if cp_size < 1:
            return f"cp_size={cp_size} must be >= 1"
        return cls._check(mask, num_heads_q, num_heads_kv, cp_size, **knobs)

    @classmethod
    def _check(cls, mask, num_heads_q, num_heads_kv, cp_size, **knobs) -> str | None:
        return None

    @abstractmethod
    def _build(self, **knobs: Any) -> None:
        """Set ``self.layouts`` (one per CP rank) and everything ``attention`` needs."""

    # -- data movement -----------------------------------------------------------------------
    @property
    def local_seqlen(self) -> int:
        return layout_len(self.layouts[self.cp_rank])

    def shard(self, x_global: torch.Tensor) -> torch.Tensor:
        """This rank's rows of a global tensor, in the strategy's local order.

        x_global: [seqlen, ...] (q, k, v, dout: [seqlen, num_heads, head_dim]) ->
        [local_seqlen, ...], a new tensor (not a view), not requiring grad.
        """
        if x_global.shape[0] != self.mask.seqlen:
            raise ValueError(f"x_global has {x_global.shape[0]} rows, the mask has "
                             f"seqlen={self.mask.seqlen}")
        return x_global.detach().index_select(0, self._index.to(x_global.device))

    def unshard(self, y_local: torch.Tensor) -> torch.Tensor:
        """Inverse of ``shard`` over the group: all ranks' rows gathered into global order.

        y_local: [local_seqlen, ...] on every rank -> [seqlen, ...] on every rank (no autograd).
        """
        y_local = y_local.detach()
        lengths = [layout_len(layout) for layout in self.layouts]
        parts = all_gather_uneven(y_local, lengths, self.group, CommStats(), "fwd")
        index = torch.cat([layout_index(layout, y_local.device) for layout in self.layouts])
        out = y_local.new_empty((self.mask.seqlen,) + tuple(y_local.shape[1:]))
        out[index] = torch.cat(parts)
        return out

    @abstractmethod
    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Attention of this rank's q rows under the global mask, with autograd.

        q: [local_seqlen, num_heads_q, head_dim], k/v: [local_seqlen, num_heads_kv, head_dim]
        (from ``shard``) -> out [local_seqlen, num_heads_q, head_dim] in q's dtype. Collective:
        every rank of the group calls it (and its backward) together.
        """

    def comm_bytes(self) -> dict[str, int]:
        """Bytes this rank sent since the last ``reset_comm_stats``: {"fwd": ..., "bwd": ...}."""
        return dict(self.stats.sent_bytes)

    def reset_comm_stats(self) -> None:
        self.stats.reset()

    def global_ranks(self, group_ranks: list[int]) -> list[int]:
        """Global ranks of the given ranks of the CP group (p2p peers are global ranks)."""
        return [dist.get_global_rank(self.group, r) if self.group is not dist.group.WORLD else r
                for r in group_ranks]
