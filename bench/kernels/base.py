"""The adapter protocol every kernel file in bench/kernels/ implements, and what it returns.

An adapter is a class with

- ``name``: its registry name (== module == ``configs/kernel/<name>.yaml``);
- ``version() -> str``: the library and version it measures, for the result row;
- ``supports(mask, shapes, device) -> str | None``: a pure predicate, None when it can run the
  cell, else the reason (the table's X carries it). It must not allocate device memory;
- ``prepare(mask, shapes, device, inputs) -> Prepared``: converts the mask (only through
  ``bench.masks.convert``), lays the inputs out as the kernel wants, compiles and warms up.
  Nothing of it is timed. It may still raise ``UnsupportedMask`` for a reason found only then.

The runner builds the inputs once per cell (``Inputs``, layout ``[batch, seqlen, heads,
head_dim]``) so every kernel sees the same numbers; the correctness gate compares outputs and
gradients in that layout.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from bench.masks import Mask

__all__ = ["Shapes", "Inputs", "Prepared", "KernelAdapter", "DTYPES", "make_inputs"]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Shapes:
    """Problem sizes of one cell. ``seqlen`` is seqlen_q == seqlen_k."""

    batch: int
    seqlen: int
    num_heads_q: int
    num_heads_kv: int
    head_dim: int
    dtype: str

    def __post_init__(self) -> None:
        for name in ("batch", "seqlen", "num_heads_q", "num_heads_kv", "head_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.num_heads_q % self.num_heads_kv:
            raise ValueError(f"num_heads_q={self.num_heads_q} must be a multiple of "
                             f"num_heads_kv={self.num_heads_kv}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {list(DTYPES)}, got {self.dtype!r}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def group(self) -> int:
        """Query heads per KV head (GQA)."""
        return self.num_heads_q // self.num_heads_kv

    @property
    def softmax_scale(self) -> float:
        return 1.0 / math.sqrt(self.head_dim)


@dataclass
class Inputs:
    """q: [batch, seqlen, num_heads_q, head_dim]; k, v: [batch, seqlen, num_heads_kv, head_dim];
    dout: like q. Plain tensors (no grad); adapters copy or view them into their layout."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    dout: torch.Tensor


def make_inputs(shapes: Shapes, device: torch.device | str, seed: int = 0) -> Inputs:
    """Standard-normal q, k, v, dout from ``seed`` (drawn on the device, so large S is cheap)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    b, s, d = shapes.batch, shapes.seqlen, shapes.head_dim

    def draw(heads: int) -> torch.Tensor:
        return torch.randn(b, s, heads, d, generator=gen, device=device, dtype=torch.float32
                           ).to(shapes.torch_dtype)

    return Inputs(q=draw(shapes.num_heads_q), k=draw(shapes.num_heads_kv),
                  v=draw(shapes.num_heads_kv), dout=draw(shapes.num_heads_q))


@dataclass
class Prepared:
    """What ``prepare`` hands the runner; every callable works on tensors it already holds.

    Attributes:
        fwd: one forward pass (no autograd graph kept); returns the output in the kernel layout.
        bwd: one backward pass through a retained forward graph, gradients w.r.t. q, k, v.
        out_bshd: kernel-layout output -> ``[batch, seqlen, num_heads_q, head_dim]``.
        grads_bshd: the gradients of the last ``bwd`` call as (dq, dk, dv), each
            ``[batch, seqlen, heads, head_dim]``.
        build_ms: time spent building the kernel's mask representation (e.g. a BlockMask),
            reported apart from the kernel time; None when there is none.
        extra: adapter notes for the row's message (e.g. {"gqa": "repeat_interleave"}).
    """

    fwd: Callable[[], torch.Tensor]
    bwd: Callable[[], Any]
    out_bshd: Callable[[torch.Tensor], torch.Tensor]
    grads_bshd: Callable[[], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    build_ms: float | None = None
    extra: dict[str, str] = field(default_factory=dict)


class KernelAdapter:
    """Base class of the adapters; subclasses set ``name`` and implement the three methods."""

    name: ClassVar[str] = ""

    def version(self) -> str:
        raise NotImplementedError

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        raise NotImplementedError

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        raise NotImplementedError
