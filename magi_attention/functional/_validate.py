"""Per-call boundary checks of flex_flash_attn_func: shapes, dtypes and devices only (tensor
metadata, never their values, so a call does not synchronise). Range values are validated when
the mask's FlexAttnPlan is built (``kernels.plan``). Every message names the argument."""
from __future__ import annotations

import torch

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def validate_qkv(q, k, v) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            raise ValueError(f"{name} must be a 3-D tensor [seqlen, num_heads, head_dim], got "
                             f"{getattr(t, 'shape', type(t))}")
        if t.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{name} has dtype {t.dtype}; supported: bf16, fp16, fp32")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    if k.shape != v.shape:
        raise ValueError(f"k shape {tuple(k.shape)} != v shape {tuple(v.shape)}")
    if q.shape[2] != k.shape[2]:
        raise ValueError(f"head_dim of q ({q.shape[2]}) != head_dim of k ({k.shape[2]})")
    num_heads_q, num_heads_kv = q.shape[1], k.shape[1]
    if num_heads_kv == 0 or num_heads_q % num_heads_kv:
        raise ValueError(f"num_heads_q={num_heads_q} is not divisible by num_heads_kv={num_heads_kv}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v are on different devices: {q.device}, {k.device}, {v.device}")


def validate_range_tensors(q, q_ranges, k_ranges, attn_type_map) -> None:
    """Types, shapes and devices of the range tensors (their values: when the plan is built)."""
    for name, r in (("q_ranges", q_ranges), ("k_ranges", k_ranges),
                    ("attn_type_map", attn_type_map)):
        if not isinstance(r, torch.Tensor):
            raise TypeError(f"{name} must be an int32 tensor (or pass a FlexAttnPlan), got "
                            f"{type(r).__name__}")
        if r.dtype != torch.int32:
            raise TypeError(f"{name} must be int32, got {r.dtype}")
    for name, r in (("q_ranges", q_ranges), ("k_ranges", k_ranges)):
        if r.dim() != 2 or r.shape[1] != 2:
            raise ValueError(f"{name} must be [num_slices, 2], got {tuple(r.shape)}")
    num_slices = q_ranges.shape[0]
    if k_ranges.shape[0] != num_slices or tuple(attn_type_map.shape) != (num_slices,):
        raise ValueError(f"num_slices mismatch: q_ranges {q_ranges.shape[0]}, k_ranges "
                         f"{k_ranges.shape[0]}, attn_type_map {tuple(attn_type_map.shape)}")
    devices = {t.device for t in (q, q_ranges, k_ranges, attn_type_map)}
    if len(devices) != 1:
        raise ValueError(f"q, k, v, q_ranges, k_ranges, attn_type_map are on different devices: "
                         f"{sorted(map(str, devices))}")
