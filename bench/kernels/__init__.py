"""Kernel adapters, one file per kernel, and their registry (imported on demand).

    adapter = load_adapter("flex", compile="never")
    reason = adapter.supports(mask, shapes, device)   # None or why not
    prepared = adapter.prepare(mask, shapes, device, inputs)

The registry name equals the module name and ``configs/kernel/<name>.yaml``.
"""
from __future__ import annotations

import importlib
from typing import Any

from .base import Inputs, KernelAdapter, Prepared, Refused, Shapes, make_inputs

__all__ = ["KERNELS", "KERNEL_NAMES", "Inputs", "KernelAdapter", "Prepared", "Refused", "Shapes",
           "adapter_class", "load_adapter", "make_inputs"]

KERNELS: dict[str, str] = {
    "naive": "bench.kernels.naive:Naive",
    "sdpa": "bench.kernels.sdpa:Sdpa",
    "sdpa_math": "bench.kernels.sdpa_math:SdpaMath",
    "fa2_sdpa": "bench.kernels.fa2_sdpa:Fa2Sdpa",
    "fa2_torch": "bench.kernels.fa2_torch:Fa2Torch",
    "fa2": "bench.kernels.fa2:Fa2",
    "fa3": "bench.kernels.fa3:Fa3",
    "fa4": "bench.kernels.fa4:Fa4",
    "cudnn": "bench.kernels.cudnn:Cudnn",
    "cudnn_sdpa": "bench.kernels.cudnn_sdpa:CudnnSdpa",
    "cudnn_te": "bench.kernels.cudnn_te:CudnnTe",
    "flex": "bench.kernels.flex:Flex",
    "flashmask": "bench.kernels.flashmask:FlashMask",
    "flashinfer": "bench.kernels.flashinfer:FlashInfer",
    "ffa": "bench.kernels.ffa:Ffa",
    "ffa_fa4": "bench.kernels.ffa_fa4:FfaFa4",
    "custom": "bench.kernels.custom:Custom",
}
KERNEL_NAMES: tuple[str, ...] = tuple(KERNELS)
# Test-only adapters: loadable by name, never part of a default sweep.
_TESTING_KERNELS: dict[str, str] = {"testing_faulty": "bench.kernels._testing:FaultyKernel"}


def adapter_class(name: str) -> type[KernelAdapter]:
    """The adapter class registered as ``name`` (its module imported; ValueError if unknown)."""
    path = KERNELS.get(name) or _TESTING_KERNELS.get(name)
    if path is None:
        raise ValueError(f"unknown kernel {name!r}; known kernels: {', '.join(KERNEL_NAMES)}")
    module_name, _, class_name = path.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def load_adapter(name: str, **options: Any) -> KernelAdapter:
    """Instantiate adapter ``name`` with its options (keyword arguments of its class). A sink
    asked of an adapter whose class does not run sinks gives a ``Refused`` adapter (every cell
    unsupported, "no attention sink").

    Raises:
        ValueError: unknown name; TypeError: an option the adapter does not take.
    """
    cls = adapter_class(name)
    if options.get("sink") and "sink" not in cls.RUN_OPTIONS:
        options.pop("sink")
        return Refused(cls(**options), "no attention sink")
    return cls(**options)
