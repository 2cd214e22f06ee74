"""The local attention kernel every CP strategy calls: FFA over AttnSlices, backend pluggable."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import torch

from magi_attention.common import AttnSlice, slices_to_tensors
from magi_attention.functional import load_backend, resolve_backend


@dataclass
class LocalMask:
    """One sub-mask in local coordinates, with its range tensors cached per device."""

    slices: tuple[AttnSlice, ...]
    _tensors: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.slices)

    def tensors(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q_ranges, k_ranges, attn_type_map) int32 on ``device``."""
        key = str(device)
        if key not in self._tensors:
            self._tensors[key] = slices_to_tensors(self.slices, device=device)
        return self._tensors[key]


@dataclass(frozen=True)
class LocalKernel:
    """Forward and backward of attention of local q over a KV block under a LocalMask.

    Calls the FFA backend module (the protocol behind ``flex_flash_attn_fwd`` / ``_bwd``)
    directly: the sub-masks are in bounds by construction, and the functional API's range
    validation reads the range tensors back to the host (a device sync at every ring step).
    ``backend`` "auto" is the reference kernel on CPU and Triton (or FA4, see
    ``magi_attention.env``) on CUDA; "reference", "triton" and "fa4" force one. The backward
    accepts the merged (global) out and lse, so a CP strategy gets this key block's share of dq
    and the block's exact dk, dv.

    Layout: q [seqlen_q, num_heads_q, head_dim], k/v [seqlen_k, num_heads_kv, head_dim].
    """

    backend: str = "auto"
    softmax_scale: float | None = None
    softcap: float = 0.0
    deterministic: bool = False

    def _scale(self, q: torch.Tensor) -> float:
        return 1.0 / math.sqrt(q.shape[-1]) if self.softmax_scale is None else self.softmax_scale

    def module(self, device: torch.device):
        """The backend module "auto" resolves to on ``device`` (raises BackendUnavailable)."""
        return load_backend(resolve_backend(self.backend, device))

    def fwd(self, q, k, v, mask: LocalMask) -> tuple[torch.Tensor, torch.Tensor]:
        """(out [Sq, Hq, D] q.dtype, lse [Sq, Hq] fp32); an empty mask gives (0, -inf)."""
        if not len(mask):
            return (torch.zeros_like(q),
                    torch.full(q.shape[:2], -math.inf, dtype=torch.float32, device=q.device))
        out, lse, _ = self.module(q.device).fwd(q, k, v, *mask.tensors(q.device), self._scale(q),
                                                float(self.softcap), False)
        return out, lse

    def bwd(self, dout, q, k, v, out, lse, mask: LocalMask):
        """(dq, dk, dv) in the input dtypes, or None for an empty mask (all zero)."""
        if not len(mask):
            return None
        return self.module(q.device).bwd(dout.contiguous(), q, k, v, out, lse,
                                         *mask.tensors(q.device), self._scale(q),
                                         float(self.softcap), self.deterministic)


def make_local_mask(slices: Sequence[AttnSlice]) -> LocalMask:
    return LocalMask(tuple(slices))
