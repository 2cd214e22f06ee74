"""The documented environment overrides, each read once at import. An explicit argument wins.

MAGI_ATTENTION_FA4_BACKEND (default 1)
    Whether ``backend="auto"`` (flex_flash_attn_func, MagiAttention, the CP baselines' local
    kernel) may pick the FA4 backend: with 1 it runs FA4 where flash-attn-4 is installed and
    supports the inputs (Hopper, bf16/fp16, head_dim <= 128), else Triton; 0 keeps "auto" on
    Triton.
MAGI_ATTENTION_GLUON_FWD (default 1)
    Whether the Triton backend's forward runs its Gluon kernel (kernels.triton.gluon_forward,
    warp-specialised, sm90 only) where the inputs allow; 0 keeps the Triton forward everywhere.
MAGI_ATTENTION_GLUON_BWD (default 1)
    Whether the Triton backend's backward runs its Gluon one-pass kernel (kernels.triton.
    gluon_backward, sm90 only; dq by TMA reduce-adds, so not bitwise repeatable) where the
    inputs allow, deterministic=False and the plan's q-tile lists are long enough
    (gluon_backward.plan_suits); 0 keeps the ordered Triton backward everywhere.
MAGI_ATTENTION_PACK_GQA (default 1)
    Whether the Triton backend's forward packs a kv head's q heads into one program (PackGQA,
    kernels.triton.configs.pack_config) where it was measured to win: GQA masks whose rows hold
    many key intervals or too few keys for the Gluon forward (block, hash and qk sparsity); 0
    keeps one program per q head.
MAGI_ATTENTION_CACHED_LAUNCH (default 1)
    Whether the Triton backend's kernels launch through the compiled handle kept per call-site
    key after a key's first launch (kernels.triton._launch: no per-call argument binding, 15-50
    us of host time less a launch); 0 sends every launch through Triton's JITFunction.run.
MAGI_ATTENTION_KV_PADS (default 1)
    Whether MagiAttention's fused KV buffer puts a few unused, zero-filled keys before a segment
    so that its longest own run starts on its rows' 128-key tile grid, where that splits no
    document (meta.fused_layout; the Triton and reference kernels; FA4's keys are never padded).
    Read when a key is built; 0 packs the buffer tight (an A/B switch, notes/magi_cp.md "Session
    42").
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
PREFER_GLUON_FWD: bool = _flag("MAGI_ATTENTION_GLUON_FWD", default=True)
PREFER_GLUON_BWD: bool = _flag("MAGI_ATTENTION_GLUON_BWD", default=True)
PACK_GQA: bool = _flag("MAGI_ATTENTION_PACK_GQA", default=True)
CACHED_LAUNCH: bool = _flag("MAGI_ATTENTION_CACHED_LAUNCH", default=True)
KV_PADS: bool = _flag("MAGI_ATTENTION_KV_PADS", default=True)
LOG_LEVEL: str = os.environ.get("MAGI_ATTENTION_LOG_LEVEL", "WARNING").strip().upper()


def _apply_log_level(level: str) -> None:
    if not isinstance(logging.getLevelName(level), int):
        raise ValueError(f"MAGI_ATTENTION_LOG_LEVEL must be a logging level name (DEBUG, INFO, "
                         f"WARNING, ERROR, CRITICAL), got {level!r}")
    logging.getLogger("magi_attention").setLevel(level)


_apply_log_level(LOG_LEVEL)
