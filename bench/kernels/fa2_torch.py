"""fa2_torch: the FlashAttention-2 kernels that torch ships (``aten._flash_attention_forward`` /
``aten._flash_attention_backward``, the ops under SDPA's FLASH_ATTENTION backend and
``torch.nn.attention.varlen``), called directly: dense bshd with a window (full, causal,
sliding window) or varlen documents (cu_seqlens), GQA native, forward and backward.

Each timed call is one op: the forward returns out and lse, the backward takes the out and lse
of one forward run in ``prepare``, as the autograd formula of the op does. ``fa2`` is the
flash-attn package (a source distribution only); ``fa2_sdpa`` the same kernels behind SDPA,
which takes no window or cu_seqlens.
"""
from __future__ import annotations

import torch

from bench.masks import Mask

from ._autograd import half_dtype, needs_cuda
from ._flash import flash_plan, plan_reason
from .base import Inputs, KernelAdapter, Prepared, Shapes

MAX_HEAD_DIM = 256  # "FlashAttention backward only supports head dimension at most 256"


def _redirected() -> str | None:
    """torch can route these ops to FA3/FA4 (``activate_flash_attention_impl``); then they are
    not FA2 any more."""
    current = getattr(torch.nn.attention, "current_flash_attention_impl", lambda: None)()
    return None if current is None else (f"torch's flash ops are redirected to {current} "
                                         f"(torch.nn.attention.activate_flash_attention_impl)")


def _flash_version() -> str:
    get = getattr(torch.nn.attention, "_get_flash_version", None)
    return get() if get is not None else "?"


class Fa2Torch(KernelAdapter):
    name = "fa2_torch"

    def version(self) -> str:
        return f"FlashAttention-2 {_flash_version()} bundled in torch {torch.__version__}"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        reason = needs_cuda(device) or half_dtype(shapes.dtype) or _redirected()
        if reason:
            return reason
        if not torch.backends.cuda.is_flash_attention_available():
            return "this torch build has no FlashAttention kernels"
        if torch.cuda.get_device_capability(device) < (8, 0):
            return "torch's FlashAttention-2 needs sm80 or newer"
        if shapes.head_dim > MAX_HEAD_DIM or shapes.head_dim % 8:
            return f"FA2 head_dim must be a multiple of 8 and <= {MAX_HEAD_DIM}, got {shapes.head_dim}"
        return plan_reason(mask)

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        plan = flash_plan(mask, shapes.batch, device)
        batch, seqlen = shapes.batch, shapes.seqlen
        if plan.varlen:
            layout = lambda t: t.detach().reshape(-1, *t.shape[2:]).clone()  # thd
            cu, max_seqlen, causal, window = plan.cu_seqlens, plan.max_seqlen, plan.causal, (-1, -1)
        else:
            layout = lambda t: t.detach().contiguous().clone()  # bshd
            cu, max_seqlen, causal, window = None, seqlen, False, plan.window
        q, k, v, dout = (layout(t) for t in (inputs.q, inputs.k, inputs.v, inputs.dout))
        scale = shapes.softmax_scale
        # causal is a window (-1, 0); the kernel reads it either way, so pass it as FA2 does
        causal = causal or window == (-1, 0)
        if causal:
            window = (-1, -1)

        def forward():
            return torch.ops.aten._flash_attention_forward(
                q, k, v, cu, cu, max_seqlen, max_seqlen, 0.0, causal, False, scale=scale,
                window_size_left=window[0], window_size_right=window[1])

        out, lse, rng_state, unused, _ = forward()
        state: dict[str, tuple] = {}

        def bwd() -> None:
            state["grads"] = torch.ops.aten._flash_attention_backward(
                dout, q, k, v, out, lse, cu, cu, max_seqlen, max_seqlen, 0.0, causal, rng_state,
                unused, scale=scale, window_size_left=window[0], window_size_right=window[1])

        def to_bshd(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, seqlen, *t.shape[1:]) if plan.varlen else t

        def grads_bshd():
            if "grads" not in state:
                raise RuntimeError("grads_bshd() called before bwd()")
            return tuple(to_bshd(g) for g in state["grads"])

        how = (f"varlen, causal={causal}" if plan.varlen else f"dense, causal={causal}, "
               f"window={window}")
        return Prepared(fwd=lambda: forward()[0], bwd=bwd, out_bshd=to_bshd, grads_bshd=grads_bshd,
                        set_dout=lambda t: dout.copy_(layout(t)),
                        extra={"mask": how, "gqa": "native"})
