"""The CUDA driver library (libcuda) through ctypes, for the driver calls torch does not expose:
stream memory writes (stream_flag)."""
from __future__ import annotations

import ctypes

_lib = None


def libcuda() -> ctypes.CDLL:
    """The driver library, loaded once (OSError where there is none: a machine without a GPU
    driver)."""
    global _lib
    if _lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        _lib = lib
    return _lib


def driver_reason() -> str | None:
    """Why the driver library cannot be called here (None when it can)."""
    try:
        libcuda()
    except OSError as e:  # no driver library (a CPU-only build on a GPU-less machine)
        return f"the CUDA driver library is not loadable: {e}"
    return None


def check(code: int, call: str) -> None:
    """A RuntimeError naming ``call`` and the driver's message where ``code`` is not success."""
    if code != 0:
        text = ctypes.c_char_p()
        libcuda().cuGetErrorString(code, ctypes.byref(text))
        raise RuntimeError(f"{call} failed ({code}: {(text.value or b'').decode()})")
