"""Shims that let Triton 3.6's interpreter (TRITON_INTERPRET=1, the CPU path of the Triton
kernels' tests and of the sweep's dry run) run this project's kernels. Import after setting
TRITON_INTERPRET=1 and before the kernels are decorated, then call :func:`patch`."""
from __future__ import annotations

__all__ = ["patch"]


def patch() -> None:
    """Idempotent. numpy >= 2.4 refuses ``int()`` of a 1-element 1-D array, which is how the
    interpreter holds a loaded scalar (``range(start, end)`` over loaded bounds fails there):
    give the interpreter's tensors an ``__index__``."""
    import numpy as np
    from triton.runtime import interpreter

    if not getattr(interpreter, "_magi_patched", False):
        patch_lang_tensor = interpreter._patch_lang_tensor

        def patch_lang_tensor_with_index(tensor, scope):
            patch_lang_tensor(tensor, scope)
            scope.set_attr(tensor, "__index__",
                           lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

        interpreter._patch_lang_tensor = patch_lang_tensor_with_index
        interpreter._magi_patched = True
