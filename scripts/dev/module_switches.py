"""Setting a kernel module's switch for an A/B arm without editing it: the Gluon modules keep
some switches as ``gl.constexpr`` (read inside kernels) and some as plain values (read by the
launch functions), and an arm's value must keep the kind the module gave it. A switch is read
when a kernel compiles, so each arm runs in its own process
(fwd_fa4_probe.py --variant; tests/.../test_triton_resources.py's _arm_sass)."""
from __future__ import annotations

from triton.experimental.gluon import language as gl


def set_switch(module, name: str, value) -> None:
    """``module.name = value``, wrapped in gl.constexpr where the module's own value is one
    (AttributeError for a name the module does not have)."""
    old = getattr(module, name)
    setattr(module, name, gl.constexpr(value) if isinstance(old, gl.constexpr) else value)
