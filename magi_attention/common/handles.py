"""Int handles of live objects, for custom ops (torch.library) that need non-tensor state.

An op's arguments are tensors and scalars, so a FlexAttnPlan or a DistAttnRuntime travels as
its ``id()``: each registers itself here when built, and the op's implementation looks it up.
Under torch.compile the caller's ``id(obj)`` becomes a constant of the graph, guarded on the
object's identity, so another object recompiles; the registry holds weak references only.
"""
from __future__ import annotations

import weakref

_LIVE: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()


def register(obj: object) -> None:
    """Make ``obj`` reachable by ``lookup(id(obj))`` while it lives."""
    _LIVE[id(obj)] = obj


def lookup(handle: int, kind: type):
    """The live ``kind`` registered under ``handle``; RuntimeError if it was freed."""
    obj = _LIVE.get(handle)
    if not isinstance(obj, kind):
        raise RuntimeError(f"no live {kind.__name__} has handle {handle}: the one a compiled "
                           f"graph was built for was freed; keep it alive while the graph runs")
    return obj
