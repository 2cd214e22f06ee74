"""Shared by the adapters: input layouts, and fwd/bwd callables around an autograd attention."""
from __future__ import annotations

from collections.abc import Callable

import torch

from .base import Inputs, Prepared, Shapes

# bshd: [batch, seqlen, heads, head_dim] (flash-attn, FA4); bhsd: [batch, heads, seqlen,
# head_dim] (SDPA, FlexAttention); thd: [batch * seqlen, heads, head_dim] (varlen, FFA).
LAYOUTS = ("bshd", "bhsd", "thd")


def to_layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """A fresh contiguous leaf tensor in ``layout`` that requires grad, from a bshd tensor."""
    if layout == "bshd":
        out = t.detach().clone()
    elif layout == "bhsd":
        out = t.detach().transpose(1, 2).contiguous()
    elif layout == "thd":
        out = t.detach().reshape(-1, *t.shape[2:]).clone()
    else:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return out.requires_grad_(True)


def from_layout(t: torch.Tensor, layout: str, batch: int) -> torch.Tensor:
    """Back to bshd (a view where possible)."""
    if layout == "bshd":
        return t
    if layout == "bhsd":
        return t.transpose(1, 2)
    if layout == "thd":
        return t.reshape(batch, -1, *t.shape[1:])
    raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def autograd_prepared(attention: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
                      inputs: Inputs, layout: str, build_ms: float | None = None,
                      extra: dict[str, str] | None = None) -> Prepared:
    """Prepared for an ``attention(q, k, v) -> out`` that is differentiable by torch autograd.

    q, k, v and dout are copied into ``layout``; ``fwd`` runs under no_grad on detached inputs; ``bwd`` builds one
    forward graph on its first call (a warmup or gate call, never timed) and then takes
    ``torch.autograd.grad`` through it with ``retain_graph``, so each timed call is exactly one
    backward and gradients do not accumulate.
    """
    batch = inputs.q.shape[0]
    q, k, v = (to_layout(t, layout) for t in (inputs.q, inputs.k, inputs.v))
    dout = to_layout(inputs.dout, layout).detach()
    state: dict[str, object] = {}

    def fwd() -> torch.Tensor:
        # detached inputs: a forward-only call (kernels such as FlexAttention on CPU refuse
        # inputs that require grad, and compiled ones pick their inference graph)
        with torch.no_grad():
            return attention(q.detach(), k.detach(), v.detach())

    def bwd() -> None:
        if "out" not in state:
            state["out"] = attention(q, k, v)
        state["grads"] = torch.autograd.grad(state["out"], (q, k, v), dout, retain_graph=True)

    def grads_bshd():
        if "grads" not in state:
            raise RuntimeError("grads_bshd() called before bwd()")
        return tuple(from_layout(g, layout, batch) for g in state["grads"])

    def set_dout(t: torch.Tensor) -> None:
        dout.copy_(to_layout(t, layout).detach())

    return Prepared(fwd=fwd, bwd=bwd, out_bshd=lambda out: from_layout(out, layout, batch),
                    grads_bshd=grads_bshd, build_ms=build_ms, extra=dict(extra or {}),
                    set_dout=set_dout)


def needs_cuda(device: torch.device) -> str | None:
    return None if device.type == "cuda" else f"needs a CUDA device, got {device.type}"


def half_dtype(dtype: str) -> str | None:
    return None if dtype in ("bfloat16", "float16") else f"needs bfloat16 or float16, got {dtype}"


def repeat_kv(t: torch.Tensor, group: int, heads_axis: int) -> torch.Tensor:
    """GQA by copying each KV head ``group`` times along the heads axis (for kernels without GQA)."""
    return t if group == 1 else t.repeat_interleave(group, dim=heads_axis)


def sink_reason(sink: bool, shapes: Shapes) -> str | None:
    """Why an adapter asked for a sink cannot run the cell: the cell has no sink logits
    (``Shapes.num_sink`` is set by the sweep's ``sink=true``)."""
    if sink and not shapes.num_sink:
        return "sink=True, but the cell has no sink logits (Shapes.num_sink 0; set sink=true)"
    return None
