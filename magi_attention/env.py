"""The documented environment overrides, each read once at import. An explicit argument wins.

MAGI_ATTENTION_FA4_BACKEND=1
    ``flex_flash_attn_func(..., backend="auto")`` prefers the FA4 backend (when flash-attn-4 is
    installed and the tensors are on CUDA) over the Triton one.
MAGI_ATTENTION_LOG_LEVEL
    Level for the ``magi_attention`` logger (default WARNING).
"""
from __future__ import annotations

import os


def _flag(name: str) -> bool:
    return os.environ.get(name, "0").strip().lower() in ("1", "true", "yes", "on")


PREFER_FA4_BACKEND: bool = _flag("MAGI_ATTENTION_FA4_BACKEND")
LOG_LEVEL: str = os.environ.get("MAGI_ATTENTION_LOG_LEVEL", "WARNING")
