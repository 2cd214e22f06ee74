"""naive: eager torch ``softmax(Q K^T * scale + mask) V`` with a dense bool mask; the memory
baseline (it materialises the [batch, heads, S, S] scores and probabilities). ``sink=True``:
the sink logits join the softmax as extra columns whose probabilities are dropped."""
from __future__ import annotations

import torch

from bench.masks import Mask, convert

from ._autograd import autograd_prepared, repeat_kv, sink_reason
from .base import Inputs, KernelAdapter, Prepared, Shapes


class Naive(KernelAdapter):
    name = "naive"
    RUN_OPTIONS = frozenset({"sink"})
    sink = False

    def __init__(self, sink: bool = False) -> None:
        self.sink = bool(sink)

    def version(self) -> str:
        return f"torch {torch.__version__} (eager)"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        return sink_reason(self.sink, shapes)

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        dense = convert.to_dense(mask, device=device)  # [S, S] or [Hkv, S, S]
        if dense.dim() == 3:
            dense = dense.repeat_interleave(shapes.group, dim=0)
        has_empty_rows = bool((~dense.any(dim=-1)).any())
        scale, group = shapes.softmax_scale, shapes.group
        # [heads, 1, num_sink]: every row's extra score columns
        sink = inputs.sink.t()[:, None, :] if self.sink else None

        def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            k, v = repeat_kv(k, group, 1), repeat_kv(v, group, 1)
            scores = (q @ k.transpose(-2, -1)) * scale
            scores = scores.masked_fill(~dense, float("-inf")).float()
            if sink is not None:
                columns = sink.expand(*scores.shape[:-1], sink.shape[-1])
                probs = torch.softmax(torch.cat([scores, columns], dim=-1), dim=-1)
                probs = probs[..., :scores.shape[-1]]
            else:
                probs = torch.softmax(scores, dim=-1)
            if has_empty_rows:  # softmax of an all -inf row is NaN; such rows attend to nothing
                probs = probs.nan_to_num(0.0)
            return probs.to(q.dtype) @ v

        return autograd_prepared(attention, inputs, "bhsd", extra={"gqa": "repeat_interleave"})
