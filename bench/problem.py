"""The problem of one benchmark cell, shared by the kernel and the CP sweeps: its sizes
(``Shapes``) and its inputs (``Inputs``, layout ``[batch, seqlen, heads, head_dim]``), drawn
once per cell so every kernel and strategy sees the same numbers."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["DTYPES", "Shapes", "Inputs", "make_inputs"]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Shapes:
    """Problem sizes of one cell. ``seqlen`` is seqlen_q == seqlen_k. ``num_sink``: attention-
    sink logits per q head (0: none; the kernel sweep's ``sink=true``)."""

    batch: int
    seqlen: int
    num_heads_q: int
    num_heads_kv: int
    head_dim: int
    dtype: str
    num_sink: int = 0

    def __post_init__(self) -> None:
        for name in ("batch", "seqlen", "num_heads_q", "num_heads_kv", "head_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.num_sink, int) or self.num_sink < 0:
            raise ValueError(f"num_sink must be an int >= 0, got {self.num_sink!r}")
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
    dout: like q; sink: fp32 [num_sink, num_heads_q] attention-sink logits (every batch row's),
    None without. Plain tensors (no grad); adapters copy or view them into their layout."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    dout: torch.Tensor
    sink: torch.Tensor | None = None


def _draws(shapes: Shapes, device: torch.device | str, seed: int):
    """q, k, v, dout in turn, standard-normal from ``seed`` (drawn on the device, so large S
    is cheap)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    b, s, d = shapes.batch, shapes.seqlen, shapes.head_dim
    for heads in (shapes.num_heads_q, shapes.num_heads_kv, shapes.num_heads_kv,
                  shapes.num_heads_q):
        yield torch.randn(b, s, heads, d, generator=gen, device=device, dtype=torch.float32
                          ).to(shapes.torch_dtype)


def make_inputs(shapes: Shapes, device: torch.device | str, seed: int = 0) -> Inputs:
    """Standard-normal q, k, v, dout from ``seed``; with ``shapes.num_sink``, the sink logits
    too (from a generator of their own: q, k, v, dout are the same with or without)."""
    inputs = Inputs(*_draws(shapes, device, seed))
    if shapes.num_sink:
        gen = torch.Generator(device=device).manual_seed(seed + 1)
        inputs.sink = torch.randn(shapes.num_sink, shapes.num_heads_q, generator=gen,
                                  device=device)
    return inputs


def make_dout(shapes: Shapes, device: torch.device | str, seed: int = 0) -> torch.Tensor:
    """The dout ``make_inputs`` draws for ``seed``, alone (q, k, v drawn and dropped one at a
    time before it): what the runners time a backward with after gating it on a restricted
    copy (``bench.gate.restrict_dout``)."""
    for dout in _draws(shapes, device, seed):
        pass
    return dout
