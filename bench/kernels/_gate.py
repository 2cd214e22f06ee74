"""The correctness gate: before a kernel is timed on a cell, its output (and at small S its
gradients) must match FFA's pure-torch reference backend on the same inputs.

At ``seqlen <= full_max_seqlen`` the reference runs on every row, with gradients. Above, it runs
on a few blocks of query rows only: each mask slice is clipped to a block's rows (exactly, by
``AttnSlice.clip``) and shifted onto the packed sample, so the reference costs
``rows x seqlen`` instead of ``seqlen^2``. The error measure is the relative L2 error
``||out - ref|| / ||ref||`` in fp32, with a bound per input dtype.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bench.masks import Mask
from magi_attention.common import AttnRange, slices_to_tensors
from magi_attention.functional import flex_flash_attn_func

from .base import Inputs, Prepared, Shapes

# Relative L2 error bounds. bf16 kernels round P and out to 8 mantissa bits (~4e-3 relative per
# element); a wrong mask on the compared rows gives errors of order 0.1 to 1.
REL_TOL = {"float32": 1e-4, "bfloat16": 2e-2, "float16": 5e-3}
GRAD_TOL_FACTOR = 2.0
NUM_ROW_BLOCKS = 4


@dataclass(frozen=True)
class Reference:
    rows: torch.Tensor                 # int64 query rows compared
    out: torch.Tensor                  # [batch, len(rows), num_heads_q, head_dim] fp32
    grads: tuple[torch.Tensor, ...] | None   # dq, dk, dv [batch, seqlen, heads, head_dim] fp32


@dataclass(frozen=True)
class GateResult:
    passed: bool
    message: str


def sample_row_blocks(seqlen: int, rows: int, seed: int) -> list[tuple[int, int]]:
    """NUM_ROW_BLOCKS disjoint blocks of ~rows / NUM_ROW_BLOCKS rows, the last one ending at S."""
    if rows >= seqlen:
        return [(0, seqlen)]
    size = max(1, rows // NUM_ROW_BLOCKS)
    slots = seqlen // size
    rng = np.random.default_rng(seed)
    picks = rng.choice(slots - 1, size=min(NUM_ROW_BLOCKS - 1, slots - 1), replace=False)
    starts = sorted(int(p) * size for p in picks) + [seqlen - size]
    return [(s, s + size) for s in starts]


def _sub_mask_tensors(slices, seqlen: int, blocks: list[tuple[int, int]], device):
    """``slices`` restricted to the row blocks, with q re-indexed onto the packed rows."""
    full_k = AttnRange(0, seqlen)
    pieces, offset = [], 0
    for start, end in blocks:
        for s in slices:
            pieces += [p.shift(offset - start, 0) for p in s.clip(AttnRange(start, end), full_k)]
        offset += end - start
    return slices_to_tensors(pieces, device=device)


def _head_groups(mask: Mask, shapes: Shapes) -> list[tuple[tuple, slice, slice]]:
    """(slices, query heads, KV heads): one group for a shared mask, one per KV head otherwise."""
    if mask.head_slices is None:
        return [(mask.slices, slice(None), slice(None))]
    g = shapes.group
    return [(s, slice(h * g, (h + 1) * g), slice(h, h + 1)) for h, s in enumerate(mask.head_slices)]


def reference(mask: Mask, shapes: Shapes, inputs: Inputs, full_max_seqlen: int, rows: int,
              seed: int) -> Reference:
    """FFA reference (fp32) on the gate's rows; gradients too when the whole sequence is used."""
    full = shapes.seqlen <= full_max_seqlen
    blocks = [(0, shapes.seqlen)] if full else sample_row_blocks(shapes.seqlen, rows, seed)
    device = inputs.q.device
    row_idx = torch.cat([torch.arange(a, b) for a, b in blocks]).to(device)
    q = inputs.q[:, row_idx].float().requires_grad_(full)
    k = inputs.k.float().requires_grad_(full)
    v = inputs.v.float().requires_grad_(full)
    out = torch.zeros_like(q)
    for slices, q_heads, kv_heads in _head_groups(mask, shapes):
        q_ranges, k_ranges, types = _sub_mask_tensors(slices, shapes.seqlen, blocks, device)
        for b in range(shapes.batch):
            o, _ = flex_flash_attn_func(q[b, :, q_heads], k[b, :, kv_heads], v[b, :, kv_heads],
                                        q_ranges, k_ranges, types,
                                        softmax_scale=shapes.softmax_scale, backend="reference")
            out[b, :, q_heads] = o
    grads = torch.autograd.grad(out, (q, k, v), inputs.dout.float()) if full else None
    return Reference(rows=row_idx, out=out.detach(), grads=grads)


def _rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    x = x.float()
    if not torch.isfinite(x).all():
        return float("inf")
    return float((x - ref).norm() / ref.norm().clamp_min(1e-30))


def check_out(prepared: Prepared, ref: Reference, dtype: str) -> GateResult:
    """Compare the prepared kernel's forward output with the reference on the gate's rows."""
    tol = REL_TOL[dtype]
    out = prepared.out_bshd(prepared.fwd())[:, ref.rows]
    err = _rel_err(out, ref.out)
    if not err <= tol:
        return GateResult(False, f"gate: out rel_err {err:.2e} > {tol:.0e} on {len(ref.rows)} rows")
    return GateResult(True, f"gate: out rel_err {err:.1e} ({len(ref.rows)} rows)")


def check_grads(prepared: Prepared, ref: Reference, dtype: str) -> GateResult:
    """Compare dq, dk, dv of one backward with the reference's (only when it has gradients)."""
    if ref.grads is None:
        return GateResult(True, "gate: grads not checked at this seqlen")
    tol = REL_TOL[dtype] * GRAD_TOL_FACTOR
    prepared.bwd()
    errs = []
    for name, g, r in zip(("dq", "dk", "dv"), prepared.grads_bshd(), ref.grads):
        err = _rel_err(g, r)
        if not err <= tol:
            return GateResult(False, f"gate: {name} rel_err {err:.2e} > {tol:.0e}")
        errs.append(err)
    return GateResult(True, f"gate: grads rel_err <= {max(errs):.1e}")
