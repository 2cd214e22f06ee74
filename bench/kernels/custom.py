"""custom: a user's kernel named by import path, e.g.
``kernel=custom kernel.custom.target=examples.custom_kernel.my_attn:my_attention``.

Its rows' ``kernel`` column is ``custom:<target>`` (``kernel.custom.label=mine`` sets another),
so two targets never share a column. A module that cannot be imported gives rows ``missing``;
a module without the named function gives rows ``error`` saying which functions it has.

The target is a callable ``fn(q, k, v, mask) -> out`` with q: [batch, seqlen, num_heads_q,
head_dim], k and v: [batch, seqlen, num_heads_kv, head_dim] (GQA: num_heads_q is a multiple of
num_heads_kv), ``mask`` a ``bench.masks.Mask`` (convert it with ``bench.masks.convert``), and out
like q. The backward is timed through torch autograd, so fn must be differentiable. Optional
attribute ``fn.supports(mask, shapes, device) -> str | None`` declines cells, with the reason.
"""
from __future__ import annotations

import difflib
import importlib
import inspect

import torch

from bench.masks import Mask

from ._autograd import autograd_prepared
from .base import Inputs, KernelAdapter, Prepared, Shapes


def parse_target(target: str | None) -> tuple[str, str]:
    """``"pkg.module:attr"`` -> (module, attr). Raises ValueError naming the malformed target."""
    module_name, sep, attr = (target or "").partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"kernel 'custom' needs target='pkg.module:function', got {target!r}")
    return module_name, attr


def _functions(module) -> list[str]:
    """The public functions a module defines (not those it imports)."""
    return [name for name, value in vars(module).items()
            if inspect.isfunction(value) and not name.startswith("_")
            and value.__module__ == module.__name__]


def load_target(target: str):
    """The callable named by ``target``.

    Raises:
        ImportError: the module cannot be imported (the runner records the cell ``missing``).
        AttributeError: the module has no such attribute; the message lists its functions (the
            runner records the cell ``error``: a misspelt name is the user's to fix).
        TypeError: the attribute is not callable.
    """
    module_name, attr = parse_target(target)
    module = importlib.import_module(module_name)
    if not hasattr(module, attr):
        functions = _functions(module)
        close = difflib.get_close_matches(attr, functions, n=1)
        hint = f"did you mean {module_name}:{close[0]}? " if close else ""
        raise AttributeError(f"custom kernel target {target!r}: module {module_name!r} has no "
                             f"{attr!r}; {hint}its functions: {', '.join(functions) or 'none'}")
    fn = getattr(module, attr)
    if not callable(fn):
        raise TypeError(f"custom kernel target {target!r} is not callable")
    return fn


class Custom(KernelAdapter):
    name = "custom"

    def __init__(self, target: str | None = None) -> None:
        parse_target(target)
        self.target = target
        self._fn = None

    @property
    def fn(self):
        if self._fn is None:
            self._fn = load_target(self.target)
        return self._fn

    def version(self) -> str:
        module_name, _ = parse_target(self.target)
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            return f"{self.target} (not importable)"
        return f"{self.target} {getattr(module, '__version__', '')}".strip()

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        try:
            fn = self.fn
        except ImportError as e:  # e.g. run from outside the repository for the example
            return f"custom target {self.target!r} not importable: {e}"
        except AttributeError:  # a misspelt function: prepare raises it again, the row is an
            return None         # error with its message (not a limit of the kernel)
        check = getattr(fn, "supports", None)
        return check(mask, shapes, device) if check is not None else None

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        fn = self.fn
        return autograd_prepared(lambda q, k, v: fn(q, k, v, mask), inputs, "bshd",
                                 extra={"target": self.target})
