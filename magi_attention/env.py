"""The documented environment overrides, each read once at import. An explicit argument wins.

MAGI_ATTENTION_FA4_BACKEND (default 1)
    Whether ``backend="auto"`` (flex_flash_attn_func, MagiAttention, the CP baselines' local
    kernel) may pick the FA4 backend: with 1 it runs FA4 where flash-attn-4 is installed and
    supports the inputs (Hopper, bf16/fp16, head_dim <= 128 or 256), else Triton; 0 keeps "auto" on
    Triton.
MAGI_ATTENTION_LOG_LEVEL
    Level of the ``magi_attention`` logger, a ``logging`` level name (default WARNING); set on
    that logger when this module is first imported (``magi_attention.functional`` imports it).
"""
from __future__ import annotations

import logging
import os


def _flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() in ("1", "true", "yes", "on")


PREFER_FA4_BACKEND: bool = _flag("MAGI_ATTENTION_FA4_BACKEND", default=True)
LOG_LEVEL: str = os.environ.get("MAGI_ATTENTION_LOG_LEVEL", "WARNING").strip().upper()


def _apply_log_level(level: str) -> None:
    if not isinstance(logging.getLevelName(level), int):
        raise ValueError(f"MAGI_ATTENTION_LOG_LEVEL must be a logging level name (DEBUG, INFO, "
                         f"WARNING, ERROR, CRITICAL), got {level!r}")
    logging.getLogger("magi_attention").setLevel(level)


_apply_log_level(LOG_LEVEL)
