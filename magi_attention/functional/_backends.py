"""Backend registry: name -> module with ``fwd``/``bwd`` and a ``check_supported`` predicate."""
from __future__ import annotations

import importlib
from types import ModuleType

import torch

from .. import env
from ..kernels import BackendUnavailable

BACKEND_MODULES = {
    "reference": "magi_attention.kernels.reference",
    "triton": "magi_attention.kernels.triton",
    "fa4": "magi_attention.kernels.fa4",
}


def load_backend(name: str) -> ModuleType:
    if name not in BACKEND_MODULES:
        raise ValueError(f"unknown backend {name!r}; expected 'auto' or one of {list(BACKEND_MODULES)}")
    try:
        return importlib.import_module(BACKEND_MODULES[name])
    except ImportError as e:
        raise BackendUnavailable(f"backend {name!r} cannot be imported: {e}") from e


def _fa4_available() -> bool:
    try:
        return getattr(load_backend("fa4"), "is_available", lambda: False)()
    except BackendUnavailable:
        return False


def resolve_backend(name: str, device: torch.device) -> str:
    """'auto' -> fa4 (when asked by env and installed) or triton on CUDA, reference elsewhere."""
    if name != "auto":
        load_backend(name)  # raises early with a clear message
        return name
    if device.type != "cuda":
        return "reference"
    if env.PREFER_FA4_BACKEND and _fa4_available():
        return "fa4"
    return "triton"
