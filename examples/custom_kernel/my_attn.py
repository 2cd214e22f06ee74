"""A user kernel for ``kernel=custom``: eager attention with a dense mask, in 20 lines.

Benchmark it against the baselines with one command:

    python -m bench.kernels 'kernel=[naive,sdpa_math,ffa,custom]' \
        kernel.custom.target=examples.custom_kernel.my_attn:my_attention

Its column in the tables and figures is ``custom:examples.custom_kernel.my_attn:my_attention``
(``kernel.custom.label=mine`` names it ``mine``). Baseline cells that an earlier run already
measured are not run again: the job's tables and figures read them from that run's file and
name it. Editing this file measures the kernel again (the rows record a hash of its source).

The contract (bench/kernels/custom.py): ``fn(q, k, v, mask) -> out`` with q: [batch, seqlen,
num_heads_q, head_dim], k and v: [batch, seqlen, num_heads_kv, head_dim], ``mask`` a
``bench.masks.Mask`` and out like q; differentiable by torch autograd (the backward is timed
through it). An optional ``fn.supports(mask, shapes, device) -> str | None`` declines cells.
"""
from __future__ import annotations

import torch

from bench.masks import convert


def my_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask) -> torch.Tensor:
    group = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)  # GQA
    keep = convert.to_dense(mask, device=q.device)            # [S, S] or [H_kv, S, S]
    if keep.dim() == 3:
        keep = keep.repeat_interleave(group, dim=0)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * q.shape[-1] ** -0.5
    probs = torch.softmax(scores.masked_fill(~keep, float("-inf")).float(), dim=-1)
    probs = probs.nan_to_num(0.0).to(q.dtype)                 # rows with no key attend to nothing
    return torch.einsum("bhqk,bkhd->bqhd", probs, v)


def _supports(mask, shapes, device) -> str | None:
    # the dense mask and scores are S x S: keep the example to sizes where that is cheap
    return None if shapes.seqlen <= 16384 else f"example kernel: seqlen {shapes.seqlen} > 16384"


my_attention.supports = _supports
