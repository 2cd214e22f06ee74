"""The local attention kernel every CP strategy calls: FFA over AttnSlices, backend pluggable."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import torch

from magi_attention.common import AttnSlice
from magi_attention.functional import FlexAttnPlan, backend_for, load_backend


@dataclass
class LocalMask:
    """One sub-mask in local coordinates; its FlexAttnPlan (validation and kernel plans) is
    built on first use per (seqlen_q, seqlen_k) and reused by every call."""

    slices: tuple[AttnSlice, ...]
    _plans: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.slices)

    def plan(self, seqlen_q: int, seqlen_k: int) -> FlexAttnPlan:
        key = (seqlen_q, seqlen_k)
        if key not in self._plans:
            self._plans[key] = FlexAttnPlan.from_slices(self.slices, seqlen_q, seqlen_k)
        return self._plans[key]


@dataclass(frozen=True)
class LocalKernel:
    """Forward and backward of attention of local q over a KV block under a LocalMask.

    Calls the FFA backend module (the protocol behind ``flex_flash_attn_fwd`` / ``_bwd``)
    directly with the mask's cached FlexAttnPlan, so a ring step does no host work and no
    device sync. ``backend`` "auto" follows the one policy of
    ``magi_attention.functional.resolve_backend`` (FA4 on Hopper where installed, else Triton;
    the reference kernel on CPU), as MagiAttention does; "reference", "triton" and "fa4" force
    one. The backward accepts the merged (global) out and lse, so a CP strategy gets this key
    block's share of dq and the block's exact dk, dv.

    Layout: q [seqlen_q, num_heads_q, head_dim], k/v [seqlen_k, num_heads_kv, head_dim].
    """

    backend: str = "auto"
    softmax_scale: float | None = None
    softcap: float = 0.0
    deterministic: bool = False

    def _scale(self, q: torch.Tensor) -> float:
        return 1.0 / math.sqrt(q.shape[-1]) if self.softmax_scale is None else self.softmax_scale

    def resolved(self, q: torch.Tensor, k: torch.Tensor | None = None) -> str:
        """The backend name "auto" resolves to for inputs like q, k (decided once per kind)."""
        return backend_for(self.backend, q, k)

    def module(self, q: torch.Tensor, k: torch.Tensor | None = None):
        """The backend module for these inputs (raises BackendUnavailable)."""
        return load_backend(self.resolved(q, k))

    def fwd(self, q, k, v, mask: LocalMask) -> tuple[torch.Tensor, torch.Tensor]:
        """(out [Sq, Hq, D] q.dtype, lse [Sq, Hq] fp32); an empty mask gives (0, -inf)."""
        if not len(mask):
            return (torch.zeros_like(q),
                    torch.full(q.shape[:2], -math.inf, dtype=torch.float32, device=q.device))
        out, lse, _ = self.module(q, k).fwd(q, k, v, mask.plan(q.shape[0], k.shape[0]),
                                            self._scale(q), float(self.softcap), False)
        return out, lse

    def bwd(self, dout, q, k, v, out, lse, mask: LocalMask):
        """(dq, dk, dv) in the input dtypes, or None for an empty mask (all zero)."""
        if not len(mask):
            return None
        return self.module(q, k).bwd(dout.contiguous(), q, k, v, out, lse,
                                     mask.plan(q.shape[0], k.shape[0]), self._scale(q),
                                     float(self.softcap), self.deterministic)


def make_local_mask(slices: Sequence[AttnSlice]) -> LocalMask:
    return LocalMask(tuple(slices))
