"""flex_flash_attn_func: attention over an AttnSlice mask, with autograd, on a chosen backend."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..common.slice import AttnSlice
from ..common.slice_array import SliceArray
from ..kernels.plan import FlexAttnPlan
from ._backends import load_backend
from ._ffa_op import compiled_call
from ._resolve import resolve_call
from ._sink import apply_sink, check_sink, sink_grad


@dataclass
class AttnForwardMeta:
    """lse: [seqlen_q, num_heads_q] fp32 (-inf on rows with no key), None when an inference call
    asked for ``return_lse=False``; max_logits: [num_heads_q] fp32."""

    lse: torch.Tensor | None
    max_logits: torch.Tensor | None = None


class FlexFlashAttnFunc(torch.autograd.Function):
    """The eager path's autograd node. With a sink, the saved out and lse are the sinked ones:
    the kernel backward then gives exact dq, dk, dv (``_sink``)."""

    @staticmethod
    def forward(ctx, q, k, v, sink, plan, softmax_scale, softcap, backend, deterministic,
                return_max_logits):
        kernel = load_backend(backend)
        out, lse, max_logits = kernel.fwd(q, k, v, plan, softmax_scale, softcap, return_max_logits)
        if sink is not None:
            out, lse = apply_sink(out, lse, sink)
        ctx.save_for_backward(q, k, v, out, lse, sink)
        ctx.args = (plan, softmax_scale, softcap, backend, deterministic)
        ctx.mark_non_differentiable(lse)
        if max_logits is not None:
            ctx.mark_non_differentiable(max_logits)
        return out, lse, max_logits

    @staticmethod
    def backward(ctx, dout, _dlse, _dmax):
        q, k, v, out, lse, sink = ctx.saved_tensors
        plan, softmax_scale, softcap, backend, deterministic = ctx.args
        dq, dk, dv = load_backend(backend).bwd(dout.contiguous(), q, k, v, out, lse, plan,
                                               softmax_scale, softcap, deterministic)
        dsink = sink_grad(sink, out, lse, dout) if ctx.needs_input_grad[3] else None
        return dq, dk, dv, dsink, None, None, None, None, None, None


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
        heads, head_dim, dtype and device. The plan is a snapshot of the ranges: it keeps its
        own copies, so editing the tensors it was built from afterwards changes nothing
        (build a new plan for a new mask). Empty lists give the empty mask (out 0, lse -inf).

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
                         return_max_logits: bool = False, return_lse: bool = True,
                         sink: torch.Tensor | None = None
                         ) -> tuple[torch.Tensor, AttnForwardMeta]:
    """Attention of packed q over packed k, v under the mask given by AttnSlices.

    Args:
        q: [seqlen_q, num_heads_q, head_dim]; k, v: [seqlen_k, num_heads_kv, head_dim]
            (batch folded into seqlen); bf16 or fp16 (fp32 on the reference backend). Strided
            views work (``qkv.unbind(1)`` of a fused [S, 3, H, D] projection, a [H, S, D]
            tensor transposed, a slice of the last dim); the gradients come back in their
            layout. Backends read them in place where their loads allow and copy otherwise.
        q_ranges: a FlexAttnPlan (``flex_attn_plan``: the mask prepared once; then k_ranges and
            attn_type_map are left out), or int32 [num_slices, 2] half-open ranges: slice i
            covers q_ranges[i] x k_ranges[i]. q_ranges may overlap: a row gathers keys from all
            slices covering it (the union is the mask). Range tensors get a plan cached by their
            identity and version counter: the first call reads them to the host, later calls
            with the same tensor objects do not. In-place edits (``copy_``, ``t[i] = x``) bump
            the version and are seen; writes through ``t.data`` or ``t.numpy()`` do not, and the
            old mask is silently kept: pass new tensors (or a new plan) instead.
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
        sink: fp32 [num_sink, num_heads_q] learnable logits (attention sinks), or None. Each
            row's softmax denominator gets ``sum_s exp(sink[s, h])`` (not scaled by
            softmax_scale, not softcapped), its output nothing from them; differentiable.
            meta.lse includes them. Every backend runs them (``functional._sink``).

    Returns:
        (out [seqlen_q, num_heads_q, head_dim] in q's dtype, AttnForwardMeta). Rows covered by
        no slice get out = 0, lse = -inf (with a sink: its logsumexp) and zero gradients.
        Under torch.compile the call is one custom op, forward and backward (no graph break).

    Raises:
        ValueError / TypeError naming the bad argument (shapes, dtypes, ranges out of bounds,
        num_slices mismatch, heads not divisible, mixed devices, unknown backend);
        BackendUnavailable when the chosen backend cannot run here.

    Example:
        >>> plan = flex_attn_plan([AttnSlice.make(0, 128, 0, 128, "causal")], seqlen_q=128)
        >>> out, meta = flex_flash_attn_func(q, k, v, plan)
    """
    if sink is not None:
        check_sink(sink, q.shape[1], q.device)
    records = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad
                                           or (sink is not None and sink.requires_grad))
    if torch.compiler.is_compiling():  # one custom op, traced without a graph break
        out, lse, max_logits = compiled_call(q, k, v, q_ranges, k_ranges, attn_type_map, sink,
                                             softmax_scale, softcap, backend, deterministic,
                                             return_max_logits)
        return out, AttnForwardMeta(lse=lse if return_lse or records else None,
                                    max_logits=max_logits)
    plan, kernel, scale = resolve_call(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale,
                                       backend, return_max_logits)
    if records:
        out, lse, max_logits = FlexFlashAttnFunc.apply(
            q, k, v, sink, plan, scale, float(softcap), kernel, deterministic, return_max_logits)
    else:  # inference: no autograd node (its overhead shows on sub-millisecond calls)
        out, lse, max_logits = load_backend(kernel).fwd(
            q, k, v, plan, scale, float(softcap), return_max_logits,
            return_lse=return_lse or sink is not None)
        if sink is not None:
            out, lse = apply_sink(out, lse, sink)
        lse = lse if return_lse else None
    return out, AttnForwardMeta(lse=lse, max_logits=max_logits)


def flex_flash_attn_fwd(q, k, v, q_ranges, k_ranges=None, attn_type_map=None, softmax_scale=None,
                        softcap: float = 0.0, backend: str = "auto"
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward only, no autograd: (out [Sq, Hq, D], lse [Sq, Hq] fp32). For CP runtimes that
    merge partial results by lse; same arguments as flex_flash_attn_func (a plan or tensors)."""
    plan, name, scale = resolve_call(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale,
                                     backend)
    out, lse, _ = load_backend(name).fwd(q, k, v, plan, scale, float(softcap), False)
    return out, lse


def flex_flash_attn_bwd(dout, q, k, v, out, lse, q_ranges, k_ranges=None, attn_type_map=None,
                        softmax_scale=None, softcap: float = 0.0, backend: str = "auto",
                        deterministic: bool = False):
    """Backward only: (dq, dk, dv). ``out`` and ``lse`` may be the global (merged) ones, which
    gives this key set's share of dq and its exact dk, dv (the ring / CP decomposition)."""
    plan, name, scale = resolve_call(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale,
                                     backend)
    return load_backend(name).bwd(dout.contiguous(), q, k, v, out, lse, plan, scale,
                                  float(softcap), deterministic)
