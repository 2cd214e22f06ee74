"""torch.nn.functional.scaled_dot_product_attention pinned to one backend: shared by the sdpa,
sdpa_math, fa2_sdpa and cudnn_sdpa adapters."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench.masks import Mask, UnsupportedMask, convert

from ._autograd import autograd_prepared, half_dtype, needs_cuda, repeat_kv
from .base import Inputs, Prepared, Shapes


def mask_arguments(mask: Mask, shapes: Shapes, device: torch.device, dense_allowed: bool
                   ) -> tuple[torch.Tensor | None, bool, str]:
    """``(attn_mask, is_causal, how)``: full -> no mask, causal -> is_causal, else a dense bool
    mask ``[S, S]`` (``[Hq, S, S]`` for per-head masks) when ``dense_allowed``."""
    if mask.head_slices is None:
        try:
            window = convert.to_window(mask)
        except UnsupportedMask:
            window = None
        if window == (-1, -1):
            return None, False, "no mask"
        if window == (-1, 0):
            return None, True, "is_causal"
    if not dense_allowed:
        raise UnsupportedMask(f"this SDPA backend takes no attn_mask; {mask.name} is neither "
                              f"full nor causal")
    dense = convert.to_dense(mask, device=device)
    if dense.dim() == 3:
        dense = dense.repeat_interleave(shapes.group, dim=0)
    return dense, False, "dense bool attn_mask"


def full_or_causal_reason(mask: Mask, shapes: Shapes, device: torch.device, hint: str = ""
                          ) -> str | None:
    """``supports`` of an SDPA backend that takes no attn_mask (CUDA, half dtypes, full or
    causal only); ``hint`` follows the mask reason (where to look for other masks)."""
    reason = needs_cuda(device) or half_dtype(shapes.dtype)
    if reason:
        return reason
    try:
        mask_arguments(mask, shapes, device, dense_allowed=False)
    except UnsupportedMask as e:
        return f"{e}{hint}"
    return None


def sdpa_prepared(mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs,
                  backend: SDPBackend, dense_allowed: bool) -> Prepared:
    """Prepared SDPA on ``backend``. GQA uses ``enable_gqa=True``; when the backend rejects it,
    K and V heads are repeated instead (the row's message says which).

    Raises:
        UnsupportedMask: the backend cannot take this mask or these shapes ("No available
            kernel" from torch, with torch's first warning line).
    """
    attn_mask, is_causal, how = mask_arguments(mask, shapes, device, dense_allowed)
    group = shapes.group

    def attention_with(gqa: str):
        def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            if gqa == "repeat_interleave":
                k, v = repeat_kv(k, group, 1), repeat_kv(v, group, 1)
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(
                    q, k, v, attn_mask=attn_mask, is_causal=is_causal,
                    enable_gqa=(gqa == "enable_gqa"))
        return attention

    modes = ["enable_gqa", "repeat_interleave"] if group > 1 else ["none"]
    last_error: RuntimeError | None = None
    for gqa in modes:
        prepared = autograd_prepared(attention_with(gqa), inputs, "bhsd",
                                     extra={"gqa": gqa, "mask": how})
        try:
            prepared.fwd()  # probe: torch raises here when the backend has no kernel for this
        except RuntimeError as e:
            if "No available kernel" not in str(e):
                raise
            last_error = e
            continue
        return prepared
    raise UnsupportedMask(f"torch SDPA {backend.name} has no kernel for {mask.name} "
                          f"({how}, dtype={shapes.dtype}, head_dim={shapes.head_dim}): "
                          f"{str(last_error).splitlines()[0]}")


def backend_version(backend: SDPBackend) -> str:
    return f"torch {torch.__version__} SDPA {backend.name}"
