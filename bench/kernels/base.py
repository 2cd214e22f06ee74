"""The adapter protocol every kernel file in bench/kernels/ implements, and what it returns.

An adapter is a class with

- ``name``: its registry name (== module == ``configs/kernel/<name>.yaml``);
- ``version() -> str``: the library and version it measures, for the result row;
- ``supports(mask, shapes, device) -> str | None``: a pure predicate, None when it can run the
  cell, else the reason (the table's X carries it). It must not allocate device memory;
- ``prepare(mask, shapes, device, inputs) -> Prepared``: converts the mask (only through
  ``bench.masks.convert``), lays the inputs out as the kernel wants, compiles and warms up.
  Nothing of it is timed. It may still raise ``UnsupportedMask`` for a reason found only then.

Run-level options (``sink=true``, ``compile=true`` in configs/kernels.yaml) reach an adapter
as keyword options only where its class lists them in ``RUN_OPTIONS``: ``load_adapter`` turns
a sink asked of an adapter without one into ``Refused`` ("no attention sink": an unsupported
row), and ``bench.config`` gives ``compile`` only to the adapters that take it (the others run
as they always do, in the same cells).

The runner builds the inputs once per cell (``Inputs``, layout ``[batch, seqlen, heads,
head_dim]``) so every kernel sees the same numbers; the correctness gate compares outputs and
gradients in that layout.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from bench.masks import Mask
# the problem types live in bench.problem (CP uses them too); adapters import them from here
from bench.problem import DTYPES, Inputs, Shapes, make_inputs

__all__ = ["Shapes", "Inputs", "Prepared", "KernelAdapter", "Refused", "DTYPES", "make_inputs"]


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
        set_dout: puts a new ``[batch, seqlen, num_heads_q, head_dim]`` dout in place of the
            one ``bwd`` reads (same shape and dtype), or None where the adapter cannot. The
            runner gates the backward with dout zero off the gate's rows and then times it with
            the whole dout: the values change the GPU's power draw and so its clocks (an H200
            ran the backward 15-21% faster on the restricted dout; docs/design/timing_method.md).
    """

    fwd: Callable[[], torch.Tensor]
    bwd: Callable[[], Any]
    out_bshd: Callable[[torch.Tensor], torch.Tensor]
    grads_bshd: Callable[[], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    build_ms: float | None = None
    extra: dict[str, str] = field(default_factory=dict)
    set_dout: Callable[[torch.Tensor], None] | None = None


class KernelAdapter:
    """Base class of the adapters; subclasses set ``name`` and implement the three methods."""

    name: ClassVar[str] = ""
    # the run-level options its __init__ takes ("sink": runs Inputs.sink; "compile": times the
    # torch.compile'd call)
    RUN_OPTIONS: ClassVar[frozenset[str]] = frozenset()

    def version(self) -> str:
        raise NotImplementedError

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        raise NotImplementedError

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        raise NotImplementedError


class Refused(KernelAdapter):
    """``adapter`` asked for what it cannot do: every cell is unsupported with ``reason``."""

    def __init__(self, adapter: KernelAdapter, reason: str) -> None:
        self.adapter, self.reason = adapter, reason
        self.name = adapter.name

    def version(self) -> str:
        return self.adapter.version()

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        return self.reason

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        raise RuntimeError(f"{self.name}: {self.reason}")
