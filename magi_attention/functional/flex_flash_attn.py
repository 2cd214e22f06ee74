"""flex_flash_attn_func: attention over an AttnSlice mask, with autograd, on a chosen backend."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..common.slice import AttnSlice
from ..common.slice_array import SliceArray
from ..kernels.plan import FlexAttnPlan
from ._backends import backend_for, backend_for_mask, load_backend
from ._plans import plan_for_tensors
from ._validate import validate_qkv, validate_range_tensors


@dataclass
class AttnForwardMeta:
    """lse: [seqlen_q, num_heads_q] fp32 (-inf on rows with no key), None when an inference call
    asked for ``return_lse=False``; max_logits: [num_heads_q] fp32."""

    lse: torch.Tensor | None
    max_logits: torch.Tensor | None = None


class FlexFlashAttnFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, plan, softmax_scale, softcap, backend, deterministic,
                return_max_logits):
        kernel = load_backend(backend)
        out, lse, max_logits = kernel.fwd(q, k, v, plan, softmax_scale, softcap, return_max_logits)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.args = (plan, softmax_scale, softcap, backend, deterministic)
        ctx.mark_non_differentiable(lse)
        if max_logits is not None:
            ctx.mark_non_differentiable(max_logits)
        return out, lse, max_logits

    @staticmethod
    def backward(ctx, dout, _dlse, _dmax):
        q, k, v, out, lse = ctx.saved_tensors
        plan, softmax_scale, softcap, backend, deterministic = ctx.args
        dq, dk, dv = load_backend(backend).bwd(dout.contiguous(), q, k, v, out, lse, plan,
                                               softmax_scale, softcap, deterministic)
        return dq, dk, dv, None, None, None, None, None, None


def flex_attn_plan(q_ranges, k_ranges=None, attn_type_map=None, seqlen_q: int | None = None,
                   seqlen_k: int | None = None) -> FlexAttnPlan:
    """Prepare a mask once for ``flex_flash_attn_func`` (validation and every kernel plan are
    then done once, and calls neither copy to the host nor synchronise).

    Args:
        q_ranges: int [num_slices, 2] (tensor, array or list), or a sequence of AttnSlice
            (then k_ranges and attn_type_map are left out).
        k_ranges: int [num_slices, 2]; attn_type_map: [num_slices] AttnMaskType values
            (None: all FULL).
        seqlen_q: rows of q (required); seqlen_k: rows of k (default seqlen_q).

    Returns:
        FlexAttnPlan, to pass as ``flex_flash_attn_func(q, k, v, plan)``; one plan serves any
        heads, head_dim, dtype and device.

    Raises:
        ValueError / TypeError naming the bad range or argument.

    Example:
        >>> plan = flex_attn_plan([AttnSlice.make(0, 4096, 0, 4096, "causal")], seqlen_q=4096)
        >>> out, meta = flex_flash_attn_func(q, k, v, plan)
    """
    if seqlen_q is None:
        raise ValueError("flex_attn_plan needs seqlen_q (the number of rows of q)")
    if k_ranges is None and attn_type_map is None and _is_slices(q_ranges):
        return FlexAttnPlan.from_slices(q_ranges, seqlen_q, seqlen_k)
    if k_ranges is None:
        raise ValueError("flex_attn_plan needs k_ranges with q_ranges (or a list of AttnSlice)")
    if attn_type_map is None:
        attn_type_map = [0] * len(q_ranges)
    return FlexAttnPlan.from_tensors(q_ranges, k_ranges, attn_type_map, seqlen_q, seqlen_k)


def _is_slices(x) -> bool:
    return isinstance(x, SliceArray) or (isinstance(x, (list, tuple))
                                         and all(isinstance(s, AttnSlice) for s in x))


def flex_flash_attn_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         q_ranges: torch.Tensor | FlexAttnPlan, k_ranges: torch.Tensor | None = None,
                         attn_type_map: torch.Tensor | None = None,
                         softmax_scale: float | None = None, softcap: float = 0.0,
                         backend: str = "auto", deterministic: bool = False,
                         return_max_logits: bool = False, return_lse: bool = True
                         ) -> tuple[torch.Tensor, AttnForwardMeta]:
    """Attention of packed q over packed k, v under the mask given by AttnSlices.

    Args:
        q: [seqlen_q, num_heads_q, head_dim]; k, v: [seqlen_k, num_heads_kv, head_dim]
            (batch folded into seqlen); bf16 or fp16 (fp32 on the reference backend).
        q_ranges: a FlexAttnPlan (``flex_attn_plan``: the mask prepared once; then k_ranges and
            attn_type_map are left out), or int32 [num_slices, 2] half-open ranges: slice i
            covers q_ranges[i] x k_ranges[i]. q_ranges may overlap: a row gathers keys from all
            slices covering it (the union is the mask). Range tensors get a plan cached by their
            identity: the first call reads them to the host, later calls with the same tensor
            objects do not.
        k_ranges: int32 [num_slices, 2]; attn_type_map: int32 [num_slices], AttnMaskType
            values (FULL, CAUSAL, INVCAUSAL, BICAUSAL).
        softmax_scale: defaults to 1 / sqrt(head_dim).
        softcap: > 0 applies softcap * tanh(scores / softcap).
        backend: "auto" (on CUDA: fa4 where flash-attn-4 is installed and supports the inputs
            and the mask is not one it runs slowly (``kernels.fa4.mask_reason``: many partial
            tiles), else triton; see ``magi_attention.env``; reference on CPU), "triton", "fa4"
            or "reference".
        deterministic: backends that accumulate with atomics switch to an ordered reduction.
        return_max_logits: also return the per-head maximum attention logit.
        return_lse: False lets an inference call (nothing needs gradients) skip writing lse,
            as FA4 and FA3 do without it; meta.lse is then None. A call that records autograd
            computes lse anyway (the backward needs it) and returns it.

    Returns:
        (out [seqlen_q, num_heads_q, head_dim] in q's dtype, AttnForwardMeta). Rows covered by
        no slice get out = 0, lse = -inf and zero gradients.

    Raises:
        ValueError / TypeError naming the bad argument (shapes, dtypes, ranges out of bounds,
        num_slices mismatch, heads not divisible, mixed devices, unknown backend);
        BackendUnavailable when the chosen backend cannot run here.

    Example:
        >>> plan = flex_attn_plan([AttnSlice.make(0, 128, 0, 128, "causal")], seqlen_q=128)
        >>> out, meta = flex_flash_attn_func(q, k, v, plan)
    """
    plan, kernel, scale = _prepare(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale,
                                   backend, return_max_logits)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        out, lse, max_logits = FlexFlashAttnFunc.apply(
            q, k, v, plan, scale, float(softcap), kernel, deterministic, return_max_logits)
    else:  # inference: no autograd node (its overhead shows on sub-millisecond calls)
        out, lse, max_logits = load_backend(kernel).fwd(q, k, v, plan, scale, float(softcap),
                                                        return_max_logits, return_lse=return_lse)
        lse = lse if return_lse else None
    return out, AttnForwardMeta(lse=lse, max_logits=max_logits)


def _prepare(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale, backend,
             return_max_logits=False):
    """(plan, resolved backend name, scale) after the per-call checks (host metadata only)."""
    validate_qkv(q, k, v)
    if isinstance(q_ranges, FlexAttnPlan):
        if k_ranges is not None or attn_type_map is not None:
            raise ValueError("pass either a FlexAttnPlan or (q_ranges, k_ranges, attn_type_map)")
        plan = q_ranges
        plan.check_shapes(q.shape[0], k.shape[0])
    else:
        validate_range_tensors(q, q_ranges, k_ranges, attn_type_map)
        plan = plan_for_tensors(q_ranges, k_ranges, attn_type_map, q.shape[0], k.shape[0])
    # "auto": the fastest backend for these inputs, then for this mask (decided once, kept in plan)
    name = backend_for(backend, q, k, v, return_max_logits)
    name = backend_for_mask(backend, name, plan, q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    return plan, name, scale


def flex_flash_attn_fwd(q, k, v, q_ranges, k_ranges=None, attn_type_map=None, softmax_scale=None,
                        softcap: float = 0.0, backend: str = "auto"
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward only, no autograd: (out [Sq, Hq, D], lse [Sq, Hq] fp32). For CP runtimes that
    merge partial results by lse; same arguments as flex_flash_attn_func (a plan or tensors)."""
    plan, name, scale = _prepare(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale, backend)
    out, lse, _ = load_backend(name).fwd(q, k, v, plan, scale, float(softcap), False)
    return out, lse


def flex_flash_attn_bwd(dout, q, k, v, out, lse, q_ranges, k_ranges=None, attn_type_map=None,
                        softmax_scale=None, softcap: float = 0.0, backend: str = "auto",
                        deterministic: bool = False):
    """Backward only: (dq, dk, dv). ``out`` and ``lse`` may be the global (merged) ones, which
    gives this key set's share of dq and its exact dk, dv (the ring / CP decomposition)."""
    plan, name, scale = _prepare(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale, backend)
    return load_backend(name).bwd(dout.contiguous(), q, k, v, out, lse, plan, scale,
                                  float(softcap), deterministic)
