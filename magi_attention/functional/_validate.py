"""Boundary checks for flex_flash_attn_func: every message names the argument and what came."""
from __future__ import annotations

import torch

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def validate_inputs(q, k, v, q_ranges, k_ranges, attn_type_map) -> None:
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
    devices = {t.device for t in (q, k, v, q_ranges, k_ranges, attn_type_map)}
    if len(devices) != 1:
        raise ValueError(f"q, k, v, q_ranges, k_ranges, attn_type_map are on different devices: "
                         f"{sorted(map(str, devices))}")
    _validate_ranges(q_ranges, k_ranges, attn_type_map, q.shape[0], k.shape[0])


def _validate_ranges(q_ranges, k_ranges, attn_type_map, seqlen_q: int, seqlen_k: int) -> None:
    for name, r in (("q_ranges", q_ranges), ("k_ranges", k_ranges)):
        if r.dim() != 2 or r.shape[1] != 2:
            raise ValueError(f"{name} must be [num_slices, 2], got {tuple(r.shape)}")
        if r.dtype != torch.int32:
            raise TypeError(f"{name} must be int32, got {r.dtype}")
    if attn_type_map.dtype != torch.int32:
        raise TypeError(f"attn_type_map must be int32, got {attn_type_map.dtype}")
    num_slices = q_ranges.shape[0]
    if k_ranges.shape[0] != num_slices or attn_type_map.shape != (num_slices,):
        raise ValueError(f"num_slices mismatch: q_ranges {q_ranges.shape[0]}, k_ranges "
                         f"{k_ranges.shape[0]}, attn_type_map {tuple(attn_type_map.shape)}")
    if num_slices == 0:
        return
    for name, r, bound in (("q_ranges", q_ranges, seqlen_q), ("k_ranges", k_ranges, seqlen_k)):
        bad = (r[:, 0] < 0) | (r[:, 0] > r[:, 1]) | (r[:, 1] > bound)
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            start, end = r[i].tolist()
            raise ValueError(f"{name}[{i}] = [{start}, {end}) is invalid: need "
                             f"0 <= start <= end <= {bound} (seqlen of {name[0]})")
    if bool(((attn_type_map < 0) | (attn_type_map > 3)).any()):
        raise ValueError(f"attn_type_map values must be in 0..3 (AttnMaskType), got "
                         f"{sorted(set(attn_type_map.tolist()))}")
