"""FFA over a per-KV-head mask: one FlexAttnPlan for each KV head, applied to that head's group of
q heads (per-head block sparsity, where every KV head keeps its own blocks).

Each head is one kernel call on views of q, k, v (no copies of the inputs); the calls write
into one out / lse and, in the backward, one dq / dk / dv, so autograd sees one node instead
of a slice-and-cat per head (whose backward zero-fills and adds a full-size gradient per head).
On CUDA the heads' calls run on a few side streams: one KV head's call launches a grid one
head wide, too few programs to fill a Hopper GPU alone."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..kernels.plan import FlexAttnPlan
from ._backends import load_backend
from ._resolve import resolve_call
from .flex_flash_attn import AttnForwardMeta

# Side streams the heads' calls are spread over (a KV head's backward grid holds one program
# per key tile; four of them together fill the SMs that one leaves idle).
MAX_STREAMS = 4
_STREAMS: dict[torch.device, list[torch.cuda.Stream]] = {}


def _side_streams(device: torch.device, count: int) -> list[torch.cuda.Stream]:
    pool = _STREAMS.setdefault(device, [])
    while len(pool) < count:
        pool.append(torch.cuda.Stream(device=device))
    return pool[:count]


def _each_head(device: torch.device, heads: int, call: Callable[[int], None]) -> None:
    """``call(h)`` for every head; on CUDA spread over side streams that start after the
    current stream's work so far and that the current stream waits for at the end."""
    if device.type != "cuda" or heads == 1:
        for h in range(heads):
            call(h)
        return
    main = torch.cuda.current_stream(device)
    streams = _side_streams(device, min(heads, MAX_STREAMS))
    for s in streams:
        s.wait_stream(main)
    for h in range(heads):
        with torch.cuda.stream(streams[h % len(streams)]):
            call(h)
    for s in streams:
        main.wait_stream(s)


def _head_slicers(h: int, group: int):
    """(q-side, kv-side) views of KV head h: its group of q heads, and the head itself."""
    return (lambda t: t[:, h * group:(h + 1) * group]), (lambda t: t[:, h:h + 1])


class _PerKVHeadFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, plans, softmax_scale, softcap, backend, deterministic):
        out, lse = _forward(q, k, v, plans, softmax_scale, softcap, backend, True)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.args = (plans, softmax_scale, softcap, backend, deterministic)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        plans, softmax_scale, softcap, backend, deterministic = ctx.args
        kernel, group = load_backend(backend), q.shape[1] // k.shape[1]
        dout = dout.contiguous()
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

        def head(h: int) -> None:
            qs, ks = _head_slicers(h, group)
            grads = kernel.bwd(qs(dout), qs(q), ks(k), ks(v), qs(out), qs(lse), plans[h],
                               softmax_scale, softcap, deterministic)
            for dst, got in zip((qs(dq), ks(dk), ks(dv)), grads):
                dst.copy_(got)

        _each_head(q.device, k.shape[1], head)
        return dq, dk, dv, None, None, None, None, None


def _forward(q, k, v, plans, softmax_scale, softcap, backend, return_lse):
    kernel, group = load_backend(backend), q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    lse = (torch.empty(q.shape[:2], dtype=torch.float32, device=q.device) if return_lse
           else None)

    def head(h: int) -> None:
        qs, ks = _head_slicers(h, group)
        o, l, _ = kernel.fwd(qs(q), ks(k), ks(v), plans[h], softmax_scale, softcap, False,
                             return_lse=return_lse)
        qs(out).copy_(o)
        if return_lse:
            qs(lse).copy_(l)

    _each_head(q.device, k.shape[1], head)
    return out, lse


def flex_flash_attn_per_kv_head(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                plans: Sequence[FlexAttnPlan], softmax_scale: float | None = None,
                                softcap: float = 0.0, backend: str = "auto",
                                deterministic: bool = False, return_lse: bool = True
                                ) -> tuple[torch.Tensor, AttnForwardMeta]:
    """Attention where KV head ``h`` and its ``num_heads_q // num_heads_kv`` q heads use the mask
    ``plans[h]`` (``flex_attn_plan`` of that head's AttnSlices). Arguments and result as
    ``flex_flash_attn_func`` (no max logits); differentiable in q, k, v.

    Raises ValueError when the plans are not one per KV head or do not fit the sequence
    lengths, besides flex_flash_attn_func's checks of q, k, v."""
    plans = list(plans)
    if not plans or not all(isinstance(p, FlexAttnPlan) for p in plans):
        raise ValueError(f"plans must be FlexAttnPlan, one per KV head, got {len(plans)}: "
                         f"{sorted({type(p).__name__ for p in plans})}")
    # q, k, v, the first plan's shapes, the backend and the scale, as flex_flash_attn_func's
    _, kernel, scale = resolve_call(q, k, v, plans[0], None, None, softmax_scale, backend)
    if len(plans) != k.shape[1]:
        raise ValueError(f"plans must be one per KV head: {k.shape[1]}, got {len(plans)}")
    for plan in plans[1:]:
        plan.check_shapes(q.shape[0], k.shape[0])
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        out, lse = _PerKVHeadFunc.apply(q, k, v, plans, scale, float(softcap), kernel,
                                        deterministic)
    else:
        out, lse = _forward(q, k, v, plans, scale, float(softcap), kernel, return_lse)
    return out, AttnForwardMeta(lse=lse)
