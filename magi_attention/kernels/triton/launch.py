"""Kernel launches without Triton's per-call binding, for calls whose specialisation is known.

``kernel[grid](*args)`` re-binds and re-specialises every argument, builds the cache key and
checks the kernel's globals on every call: 20-50 us of host time per launch on the H100 host
(docs/design/ffa_kernels.md), which at 1k tokens is most of a call. A call site that can name
everything Triton specialises on (the value of every integer argument, every tensor's dtype: the
shapes, strides, plan counts and config it passes) gives that as ``key`` (the keyword
arguments, constexprs and launch options, join it here); the first
launch of a key goes through Triton as before and keeps the compiled kernel, and later launches
of the same key (and the same device and tensor alignment) call the compiled kernel's own
launcher directly. A key of None (off the GPU: the compile-only and interpreter paths must see
every call) or a launch hook (a profiler's) sends the launch through Triton.
"""
from __future__ import annotations

import torch
from triton import knobs
from triton.runtime.jit import JITFunction

try:  # what Triton's own launch reads the stream with (torch.cuda.current_stream() costs more)
    from torch._C import _cuda_getCurrentRawStream as _raw_stream
except ImportError:  # a torch built without CUDA
    def _raw_stream(device: int) -> int:
        return torch.cuda.current_stream(device).cuda_stream


class CachedLaunch:
    """One JIT kernel's compiled handles by the caller's key (see the module's docstring)."""

    def __init__(self, fn):
        self.fn = fn
        self._handles: dict = {}

    def __call__(self, grid: tuple, key, *args, **kwargs):
        """Launch ``fn[grid](*args, **kwargs)``. ``key``: hashable, fixes every positional
        integer argument's value and every tensor's dtype; None launches through Triton (e.g.
        off the GPU, where the compile-only and interpreter paths must see every call)."""
        if key is None or _hooked():
            return self.fn[grid](*args, **kwargs)
        device = torch.cuda.current_device()
        full_key = (key, device, _alignment(args), *kwargs.values())
        handle = self._handles.get(full_key)
        if handle is None:
            compiled = self.fn[grid](*args, **kwargs)  # binds, compiles if new, launches
            tail = _constexpr_tail(self.fn, len(args), kwargs)
            if tail is not None and hasattr(compiled, "packed_metadata"):
                self._handles[full_key] = (compiled, tail)
            return compiled
        compiled, tail = handle
        g0, g1, g2 = (tuple(grid) + (1, 1))[:3]
        compiled.run(g0, g1, g2, _raw_stream(device), compiled.function,
                     compiled.packed_metadata, None, None, None, *args, *tail)
        return compiled


def cached_launch(fn) -> CachedLaunch:
    """``CachedLaunch(fn)``, for a module-level ``_launch_x = cached_launch(_x_kernel)``."""
    return CachedLaunch(fn)


def _hooked() -> bool:
    """A launch hook (a profiler's) wants Triton's launch metadata: no shortcut then."""
    # Triton 3.6 keeps an empty HookChain in each; older ones None or a function
    hooks = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
    return any(hook is not None and getattr(hook, "calls", True) for hook in hooks)


def _alignment(args) -> tuple:
    """Each tensor argument's 16-byte alignment (Triton specialises pointers on it)."""
    return tuple(a.data_ptr() % 16 == 0 for a in args if isinstance(a, torch.Tensor))


def _constexpr_tail(fn, n_args: int, kwargs: dict) -> list | None:
    """The values of the parameters after the positional ones, in order (the launcher takes
    every parameter); None where that is not what the call gave (a default left out, a
    parameter passed by keyword before a positional one) or ``fn`` is not a JIT kernel."""
    if not isinstance(fn, JITFunction):
        return None
    rest = fn.arg_names[n_args:]
    if any(name not in kwargs for name in rest):
        return None
    return [kwargs[name] for name in rest]
