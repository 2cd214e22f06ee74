"""fa3: FlashAttention-3 (Hopper): dense full / causal / sliding window, and varlen documents.

Two installs are recognised, the first importable wins:

- ``flash_attn_interface``: FA3 built from flash-attention's hopper/ folder (forward and
  backward; about an hour of nvcc, no registry wheel);
- ``fa3_fwd_interface``: the ``fa3-fwd`` wheel (0.0.3, abi3, sm90a), FA3's forward only, built
  with FLASHATTENTION_DISABLE_BACKWARD and FLASHATTENTION_DISABLE_LOCAL (no sliding window); its
  build flags are read from ``fa3_fwd_config.CONFIG`` and become the X reasons.
"""
from __future__ import annotations

import importlib
import importlib.metadata

import torch

from bench.masks import Mask

from ._autograd import half_dtype, needs_cuda
from ._flash import fa2_style_prepared, flash_plan, plan_reason
from .base import Inputs, KernelAdapter, Prepared, Shapes

# (module, distribution names, flags module or None)
INSTALLS = (("flash_attn_interface", ("flash_attn_3", "flash-attn-3", "flashattn-hopper"), None),
            ("fa3_fwd_interface", ("fa3-fwd",), "fa3_fwd_config"))


def _install() -> tuple[object, str, dict] | str:
    """(interface module, "dist version", build flags) of the first importable install, or
    the import errors."""
    errors = []
    for module, dists, flags_module in INSTALLS:
        try:
            interface = importlib.import_module(module)
        except ImportError as e:  # a missing peer is a row with status unsupported
            errors.append(f"{module}: {e}")
            continue
        flags = importlib.import_module(flags_module).CONFIG["build_flags"] if flags_module else {}
        for dist in dists:
            try:
                return interface, f"{dist} {importlib.metadata.version(dist)}", flags
            except importlib.metadata.PackageNotFoundError:
                continue
        return interface, f"{module} (version unknown)", flags
    return "FA3 not importable (" + "; ".join(errors) + ")"


class Fa3(KernelAdapter):
    name = "fa3"

    def version(self) -> str:
        install = _install()
        return install if isinstance(install, str) else install[1]

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        reason = needs_cuda(device) or half_dtype(shapes.dtype)
        if reason:
            return reason
        install = _install()
        if isinstance(install, str):
            return install
        _, version, flags = install
        if torch.cuda.get_device_capability(device)[0] != 9:
            return "FA3 is built for sm90 (Hopper) only"
        if shapes.dtype == "float16" and flags.get("FLASHATTENTION_DISABLE_FP16"):
            return f"{version} is built with FLASHATTENTION_DISABLE_FP16"
        reason = plan_reason(mask)
        if reason is None and flags.get("FLASHATTENTION_DISABLE_LOCAL"):
            plan = flash_plan(mask, 1, "cpu")
            if not plan.varlen and plan.window[0] >= 0:
                return (f"{version} is built with FLASHATTENTION_DISABLE_LOCAL: no sliding "
                        f"window ({mask.name} is window {plan.window})")
        return reason

    def supports_direction(self, direction: str) -> str | None:
        install = _install()
        if direction == "bwd" and not isinstance(install, str) and \
                install[2].get("FLASHATTENTION_DISABLE_BACKWARD"):
            return (f"{install[1]} is FA3's forward only (FLASHATTENTION_DISABLE_BACKWARD); no "
                    f"registry wheel carries FA3's backward (a hopper/ source build takes ~1 h)")
        return None

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        interface = _install()[0]
        return fa2_style_prepared(flash_plan(mask, shapes.batch, device), inputs,
                                  shapes.softmax_scale, interface.flash_attn_func,
                                  interface.flash_attn_varlen_func)
