"""cudnn_te: cuDNN fused attention through Transformer Engine's ``DotProductAttention``, pinned to
TE's FusedAttention (cuDNN) backend: full, causal, sliding window (bshd) and varlen documents
(thd with cu_seqlens). TE picks its backend from ``NVTE_FLASH_ATTN`` / ``NVTE_FUSED_ATTN``; the
adapter sets them (flash off, fused on) before building the module, as TE documents."""
from __future__ import annotations

import importlib.metadata
import os

import torch

from bench.masks import Mask

from ._autograd import autograd_prepared, half_dtype, needs_cuda
from ._flash import flash_plan, import_error, plan_reason
from .base import Inputs, KernelAdapter, Prepared, Shapes

MODULE = "transformer_engine.pytorch"
BACKEND_ENV = {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "1"}
# Why the rows are X on the device (PyPI as checked; docs/design/peers.md):
OUT_OF_REACH = ("transformer-engine-torch 2.20.2 is a source distribution only (its torch "
                "extension must be compiled against torch 2.11) and the transformer-engine-cu13 "
                "core wheel is ~276 MB, over what one device call carries (64 MiB); cuDNN with "
                "documents and windows is measured by the cudnn adapter instead")


class CudnnTe(KernelAdapter):
    name = "cudnn_te"

    def version(self) -> str:
        for dist in ("transformer-engine", "transformer_engine", "transformer-engine-torch"):
            try:
                return f"transformer-engine {importlib.metadata.version(dist)} (cuDNN fused attention)"
            except importlib.metadata.PackageNotFoundError:
                continue
        return "transformer-engine (not installed)"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        reason = needs_cuda(device) or half_dtype(shapes.dtype)
        if reason:
            return reason
        missing = import_error(MODULE)
        if missing:
            return f"{missing}; {OUT_OF_REACH}"
        return plan_reason(mask)

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        os.environ.update(BACKEND_ENV)
        from transformer_engine.pytorch import DotProductAttention

        plan = flash_plan(mask, shapes.batch, device)
        if plan.varlen:
            layout, qkv_format = "thd", "thd"
            mask_type = "padding_causal" if plan.causal else "padding"
            window = (-1, 0) if plan.causal else (-1, -1)
        else:
            layout, qkv_format = "bshd", "bshd"
            mask_type = "causal" if plan.window[1] == 0 else "no_mask"
            window = plan.window
        module = DotProductAttention(shapes.num_heads_q, shapes.head_dim,
                                     num_gqa_groups=shapes.num_heads_kv, attention_dropout=0.0,
                                     qkv_format=qkv_format, attn_mask_type=mask_type,
                                     window_size=window, softmax_scale=shapes.softmax_scale)
        kwargs = {}
        if plan.varlen:
            kwargs = dict(cu_seqlens_q=plan.cu_seqlens, cu_seqlens_kv=plan.cu_seqlens,
                          max_seqlen_q=plan.max_seqlen, max_seqlen_kv=plan.max_seqlen)
        heads_q = shapes.num_heads_q

        def attention(q, k, v):
            out = module(q, k, v, **kwargs)  # TE returns [..., heads * head_dim]
            return out.view(*out.shape[:-1], heads_q, -1)

        prepared = autograd_prepared(attention, inputs, layout,
                                     extra={"mask": f"{qkv_format} {mask_type} window={window}"})
        prepared.fwd()
        return prepared
