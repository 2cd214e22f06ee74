"""Backend registry and the one policy that turns "auto" into a backend.

Every caller that runs an FFA kernel (flex_flash_attn_func, MagiAttention's DistAttnRuntime, the
CP baselines' local kernel) resolves "auto" here, so they all run the same kernel on the same
inputs and can report which one ran. A backend module has ``fwd``/``bwd`` taking a
``FlexAttnPlan``, ``prepare(plan, head_dim, device)`` and ``unsupported_reason(q, k, v)``.
"""
from __future__ import annotations

import importlib
import warnings
from types import ModuleType

import torch

from .. import env
from ..kernels import BackendUnavailable

BACKEND_MODULES = {
    "reference": "magi_attention.kernels.reference",
    "triton": "magi_attention.kernels.triton",
    "fa4": "magi_attention.kernels.fa4",
}
# "auto" on CUDA: the first of these that can run the inputs (FA4 is the fastest on Hopper);
# the reference kernel is the last resort, with a warning.
AUTO_ORDER_CUDA = ("fa4", "triton")

_warned: set[str] = set()


def load_backend(name: str) -> ModuleType:
    if name not in BACKEND_MODULES:
        raise ValueError(f"unknown backend {name!r}; expected 'auto' or one of {list(BACKEND_MODULES)}")
    try:
        return importlib.import_module(BACKEND_MODULES[name])
    except ImportError as e:
        raise BackendUnavailable(f"backend {name!r} cannot be imported: {e}") from e


def backend_reason(name: str, q: torch.Tensor, k: torch.Tensor | None = None,
                   v: torch.Tensor | None = None) -> str | None:
    """None when backend ``name`` can run these inputs, else why not (never raises)."""
    try:
        module = load_backend(name)
    except BackendUnavailable as e:
        return str(e)
    reason = getattr(module, "unsupported_reason", None)
    if reason is None:
        return None
    k = q[:, :1] if k is None else k
    return reason(q, k, k if v is None else v)


def resolve_backend(name: str, q: torch.Tensor | torch.device, k: torch.Tensor | None = None,
                    v: torch.Tensor | None = None, return_max_logits: bool = False) -> str:
    """The backend that runs these inputs: ``name`` itself unless it is "auto".

    "auto": the reference kernel on CPU; on CUDA the first of fa4 (unless
    MAGI_ATTENTION_FA4_BACKEND=0, or ``return_max_logits``, which FA4 cannot give) and triton
    that supports the inputs, else the reference kernel with a warning. Passing only a device
    (no tensors) skips the dtype / head_dim checks.
    """
    if name != "auto":
        load_backend(name)  # raises early with a clear message
        return name
    device = q if isinstance(q, torch.device) else q.device
    if device.type != "cuda":
        return "reference"
    reasons = []
    for candidate in AUTO_ORDER_CUDA:
        if candidate == "fa4" and (not env.PREFER_FA4_BACKEND or return_max_logits):
            continue
        if isinstance(q, torch.device):
            module_ok = _available(candidate)
            reason = None if module_ok else f"{candidate} is not available"
        else:
            reason = backend_reason(candidate, q, k, v)
        if reason is None:
            return candidate
        reasons.append(reason)
    message = "; ".join(reasons)
    if message not in _warned:
        _warned.add(message)
        warnings.warn(f"FFA backend 'auto': no fast backend can run these inputs ({message}); "
                      "using the reference kernel, which is slow", stacklevel=3)
    return "reference"


_CHOSEN: dict = {}


def backend_for(name: str, q: torch.Tensor, k: torch.Tensor | None = None,
                v: torch.Tensor | None = None, return_max_logits: bool = False) -> str:
    """The backend that runs inputs like these, decided once per (name, dtype, head_dim,
    device): "auto" resolved by ``resolve_backend``, an explicit name checked by its
    ``check_supported`` (BackendUnavailable, never remembered). Every caller on a per-call path
    (flex_flash_attn_func, DistAttnRuntime, the CP local kernel) asks here, so the host work of
    the choice is not paid per call."""
    key = (name, q.dtype, q.shape[-1], str(q.device), bool(return_max_logits),
           env.PREFER_FA4_BACKEND)
    chosen = _CHOSEN.get(key)
    if chosen is None:
        k = q[:, :1] if k is None else k
        v = k if v is None else v
        if name == "auto":
            chosen = resolve_backend(name, q, k, v, return_max_logits)
        else:
            module = load_backend(name)
            if hasattr(module, "check_supported"):
                module.check_supported(q, k, v)
            chosen = name
        _CHOSEN[key] = chosen
    return chosen


def backend_for_mask(name: str, chosen: str, mask, q: torch.Tensor, k: torch.Tensor,
                     v: torch.Tensor) -> str:
    """"auto"'s backend for one mask: ``chosen`` (backend_for's, by dtype / head_dim / device)
    unless that is fa4 and FA4 would run this mask slowly (``fa4.mask_reason``: many partial
    tiles, e.g. block_sparse at 0.2x the Triton backend) while triton can run the inputs.
    Decided once per mask and kind of input, kept in the FlexAttnPlan: a lookup per call.
    Explicit backend names are never changed."""
    if name != "auto" or chosen != "fa4":
        return chosen

    def decide() -> str:
        if load_backend("fa4").mask_reason(mask, q.shape[-1]) is None:
            return "fa4"
        return "triton" if backend_reason("triton", q, k, v) is None else "fa4"

    return mask.cached(("auto_backend", q.dtype, q.shape[-1], str(q.device)), decide)


def _available(name: str) -> bool:
    try:
        return bool(getattr(load_backend(name), "is_available", lambda: True)())
    except BackendUnavailable:
        return False
