"""custom: a user's kernel named by import path, e.g.
``kernel=custom kernel.custom.target=examples.custom_kernel.my_attn:my_attention``.

The target is a callable ``fn(q, k, v, mask) -> out`` with q: [batch, seqlen, num_heads_q,
head_dim], k and v: [batch, seqlen, num_heads_kv, head_dim] (GQA: num_heads_q is a multiple of
num_heads_kv), ``mask`` a ``bench.masks.Mask`` (convert it with ``bench.masks.convert``), and out
like q. The backward is timed through torch autograd, so fn must be differentiable. Optional
attribute ``fn.supports(mask, shapes, device) -> str | None`` declines cells, with the reason.
"""
from __future__ import annotations

import importlib

import torch

from bench.masks import Mask

from ._autograd import autograd_prepared
from .base import Inputs, KernelAdapter, Prepared, Shapes


def load_target(target: str):
    """``"pkg.module:attr"`` -> the attribute. Raises ValueError on a malformed or missing name."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"custom kernel target must look like 'pkg.module:function', got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"custom kernel target {target!r}: cannot import {module_name!r}: {e}") from e
    if not hasattr(module, attr):
        raise ValueError(f"custom kernel target {target!r}: module {module_name!r} has no {attr!r}")
    fn = getattr(module, attr)
    if not callable(fn):
        raise ValueError(f"custom kernel target {target!r} is not callable")
    return fn


class Custom(KernelAdapter):
    name = "custom"

    def __init__(self, target: str | None = None) -> None:
        if not target:
            raise ValueError("kernel 'custom' needs target='pkg.module:function'")
        self.target = target
        self.fn = load_target(target)

    def version(self) -> str:
        module = importlib.import_module(self.target.partition(":")[0])
        return f"{self.target} {getattr(module, '__version__', '')}".strip()

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        check = getattr(self.fn, "supports", None)
        return check(mask, shapes, device) if check is not None else None

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        fn = self.fn
        return autograd_prepared(lambda q, k, v: fn(q, k, v, mask), inputs, "bshd",
                                 extra={"target": self.target})
