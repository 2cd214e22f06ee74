"""flex_flash_attn_func: attention over an AttnSlice mask, with autograd, on a chosen backend."""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

import torch

from ._backends import load_backend, resolve_backend
from ._validate import validate_inputs


@dataclass
class AttnForwardMeta:
    """lse: [seqlen_q, num_heads_q] fp32 (-inf on rows with no key); max_logits: [num_heads_q] fp32."""

    lse: torch.Tensor
    max_logits: torch.Tensor | None = None


class FlexFlashAttnFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale, softcap,
                backend, deterministic, return_max_logits):
        kernel = importlib.import_module(backend)
        out, lse, max_logits = kernel.fwd(q, k, v, q_ranges, k_ranges, attn_type_map,
                                          softmax_scale, softcap, return_max_logits)
        ctx.save_for_backward(q, k, v, out, lse, q_ranges, k_ranges, attn_type_map)
        ctx.args = (softmax_scale, softcap, backend, deterministic)
        ctx.mark_non_differentiable(lse)
        if max_logits is not None:
            ctx.mark_non_differentiable(max_logits)
        return out, lse, max_logits

    @staticmethod
    def backward(ctx, dout, _dlse, _dmax):
        q, k, v, out, lse, q_ranges, k_ranges, attn_type_map = ctx.saved_tensors
        softmax_scale, softcap, backend, deterministic = ctx.args
        dq, dk, dv = importlib.import_module(backend).bwd(
            dout.contiguous(), q, k, v, out, lse, q_ranges, k_ranges, attn_type_map,
            softmax_scale, softcap, deterministic)
        return dq, dk, dv, None, None, None, None, None, None, None, None


def flex_flash_attn_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         q_ranges: torch.Tensor, k_ranges: torch.Tensor,
                         attn_type_map: torch.Tensor, softmax_scale: float | None = None,
                         softcap: float = 0.0, backend: str = "auto", deterministic: bool = False,
                         return_max_logits: bool = False) -> tuple[torch.Tensor, AttnForwardMeta]:
    """Attention of packed q over packed k, v under the mask given by AttnSlices.

    Args:
        q: [seqlen_q, num_heads_q, head_dim]; k, v: [seqlen_k, num_heads_kv, head_dim]
            (batch folded into seqlen); bf16 or fp16 (fp32 on the reference backend).
        q_ranges, k_ranges: int32 [num_slices, 2], half-open; slice i covers
            q_ranges[i] x k_ranges[i]. q_ranges may overlap: a row gathers keys from all
            slices covering it (the union is the mask).
        attn_type_map: int32 [num_slices], AttnMaskType values (FULL, CAUSAL, INVCAUSAL, BICAUSAL).
        softmax_scale: defaults to 1 / sqrt(head_dim).
        softcap: > 0 applies softcap * tanh(scores / softcap).
        backend: "auto" (triton on CUDA, or fa4 when MAGI_ATTENTION_FA4_BACKEND=1 and it is
            installed; reference elsewhere), "triton", "fa4" or "reference".
        deterministic: backends that accumulate with atomics switch to an ordered reduction.
        return_max_logits: also return the per-head maximum attention logit.

    Returns:
        (out [seqlen_q, num_heads_q, head_dim] in q's dtype, AttnForwardMeta). Rows covered by
        no slice get out = 0, lse = -inf and zero gradients.

    Raises:
        ValueError / TypeError naming the bad argument (shapes, dtypes, ranges out of bounds,
        num_slices mismatch, heads not divisible, mixed devices, unknown backend);
        BackendUnavailable when the chosen backend cannot run here.

    Example:
        >>> q_ranges = torch.tensor([[0, 128]], dtype=torch.int32)
        >>> out, meta = flex_flash_attn_func(q, k, v, q_ranges, q_ranges.clone(),
        ...                                  torch.tensor([1], dtype=torch.int32))  # causal
    """
    kernel, scale = _prepare(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale, backend)
    out, lse, max_logits = FlexFlashAttnFunc.apply(
        q, k, v, q_ranges, k_ranges, attn_type_map, scale, float(softcap), kernel.__name__,
        deterministic, return_max_logits)
    return out, AttnForwardMeta(lse=lse, max_logits=max_logits)


def _prepare(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale, backend):
    validate_inputs(q, k, v, q_ranges, k_ranges, attn_type_map)
    kernel = load_backend(resolve_backend(backend, q.device))
    if hasattr(kernel, "check_supported"):
        kernel.check_supported(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    return kernel, scale


def flex_flash_attn_fwd(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale=None,
                        softcap: float = 0.0, backend: str = "auto"
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward only, no autograd: (out [Sq, Hq, D], lse [Sq, Hq] fp32). For CP runtimes that
    merge partial results by lse; same arguments as flex_flash_attn_func."""
    kernel, scale = _prepare(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale, backend)
    out, lse, _ = kernel.fwd(q, k, v, q_ranges, k_ranges, attn_type_map, scale, float(softcap), False)
    return out, lse


def flex_flash_attn_bwd(dout, q, k, v, out, lse, q_ranges, k_ranges, attn_type_map,
                        softmax_scale=None, softcap: float = 0.0, backend: str = "auto",
                        deterministic: bool = False):
    """Backward only: (dq, dk, dv). ``out`` and ``lse`` may be the global (merged) ones, which
    gives this key set's share of dq and its exact dk, dv (the ring / CP decomposition)."""
    kernel, scale = _prepare(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale, backend)
    return kernel.bwd(dout.contiguous(), q, k, v, out, lse, q_ranges, k_ranges, attn_type_map,
                      scale, float(softcap), deterministic)
