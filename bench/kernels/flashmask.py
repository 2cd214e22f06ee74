"""flashmask: PaddlePaddle's ``paddle.nn.functional.flashmask_attention`` with the column-bound
representation from ``bench.masks.convert.to_flashmask`` (startend_row_indices). Tensors cross
from torch by DLPack; each timed call ends with a Paddle device sync, because Paddle launches on
its own stream, which torch's CUDA events do not see."""
from __future__ import annotations

import importlib.metadata

import torch

from bench.masks import Mask, UnsupportedMask, convert

from ._autograd import half_dtype, needs_cuda
from ._flash import import_error
from .base import Inputs, KernelAdapter, Prepared, Shapes


def _startend(mask: Mask, device) -> tuple[torch.Tensor, bool]:
    """([1, 1, S, 2 or 4] int32, causal): causal with [LTS, LTE] when every row above the
    diagonal is masked, else [LTS, LTE, UTS, UTE]."""
    if mask.head_slices is not None:
        raise UnsupportedMask(f"this adapter passes one mask for all heads; {mask.name} has "
                              f"{mask.num_mask_heads} per-head masks")
    bounds = convert.to_flashmask(mask, device=device)
    columns = torch.arange(mask.seqlen, device=device, dtype=torch.int32)
    causal = bool((bounds["uts"] == 0).all()) and bool((bounds["ute"] == columns).all())
    keys = ("lts", "lte") if causal else ("lts", "lte", "uts", "ute")
    return torch.stack([bounds[k] for k in keys], dim=-1)[None, None].contiguous(), causal


def _to_paddle(t: torch.Tensor):
    import paddle
    return paddle.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(t.contiguous()))


def _to_torch(t) -> torch.Tensor:
    import paddle
    return torch.utils.dlpack.from_dlpack(paddle.utils.dlpack.to_dlpack(t))


# Why the rows are X on the device (PyPI as checked; docs/design/peers.md):
OUT_OF_REACH = ("the newest paddlepaddle-gpu on PyPI is 2.6.2 (2024-09), which predates "
                "paddle.nn.functional.flashmask_attention (Paddle 3.x, whose GPU wheels are on "
                "Paddle's own index only, unreachable from the device)")


class FlashMask(KernelAdapter):
    name = "flashmask"

    def version(self) -> str:
        for dist in ("paddlepaddle-gpu", "paddlepaddle"):
            try:
                return f"{dist} {importlib.metadata.version(dist)} flashmask_attention"
            except importlib.metadata.PackageNotFoundError:
                continue
        return "paddlepaddle (not installed)"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        reason = needs_cuda(device) or half_dtype(shapes.dtype)
        if reason:
            return reason
        missing = import_error("paddle")
        if missing:
            return f"{missing}; {OUT_OF_REACH}"
        import paddle.nn.functional as pf
        if not hasattr(pf, "flashmask_attention"):
            return f"this Paddle has no paddle.nn.functional.flashmask_attention; {OUT_OF_REACH}"
        try:
            _startend(mask, "cpu")
        except UnsupportedMask as e:
            return str(e)
        return None

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        import paddle
        from paddle.nn.functional import flashmask_attention

        startend, causal = _startend(mask, device)
        startend_p = _to_paddle(startend.expand(shapes.batch, -1, -1, -1))
        q, k, v = (_to_paddle(t) for t in (inputs.q, inputs.k, inputs.v))
        dout = _to_paddle(inputs.dout)
        for t in (q, k, v):
            t.stop_gradient = False
        scale = shapes.softmax_scale
        state: dict[str, object] = {}

        def attention():
            return flashmask_attention(q, k, v, startend_row_indices=startend_p, causal=causal,
                                       softmax_scale=scale)

        def fwd():
            with paddle.no_grad():
                out = attention()
            paddle.device.synchronize()
            return out

        def bwd():
            if "out" not in state:
                state["out"] = attention()
            state["grads"] = paddle.grad([state["out"]], [q, k, v], grad_outputs=[dout],
                                         retain_graph=True)
            paddle.device.synchronize()

        def grads_bshd():
            return tuple(_to_torch(g) for g in state["grads"])

        fwd()
        return Prepared(fwd=fwd, bwd=bwd, out_bshd=_to_torch, grads_bshd=grads_bshd,
                        extra={"causal": str(causal), "timing": "paddle sync per call"})
