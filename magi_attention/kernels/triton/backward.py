"""Backward Triton kernels of FFA: the ordered two-kernel path (FlashAttention-2's layout, no
atomics, bitwise repeatable), the backward of kernels.triton.bwd wherever the Gluon backward does
not run (off sm90, deterministic=True, softcap, short q-tile lists).

1. ``_preprocess_kernel``: delta = rowsum(dO * O) and lse in log2 units, both [Hq, Sq] fp32;
   rows with lse = -inf (no key anywhere) get +inf so that P = exp2(s - lse) = 0 there.
2. ``_dkdv_kernel``: one program per (key tile, kv head), over the q tiles of the transposed
   plan and the kv head's group of q heads; owns its dk, dv rows.
3. ``_dq_kernel``: one program per (q tile, q head), over the forward plan's key tiles.

A one-pass variant (dK/dV in registers, dQ added by fp32 atomics, 5 MMAs a tile pair against 7)
ran below this path on H200 at every tile shape tried (configs.bwd_config).

out and lse may be the GLOBAL (merged) ones of a context-parallel run: the result is then this
key set's share of dq and its exact dk, dv.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ..block_sparse import BlockSparsePlan
from ._mask import LOG2E, row_table_mask, tanh, union_mask
from .launch import cached_launch
from ._tma import descriptor_2d
from .configs import BwdConfig, launch_options

PREPROCESS_BLOCK = 64  # rows per preprocess program: a [64, D] tile of O and dO
GATHER_BLOCK = 1024  # elements per gather_cast program (a [Hq * D] row of 8192 takes 8)


@triton.jit
def _gather_cast_kernel(Src, Dst, RowSlots, row_len, BLOCK: tl.constexpr):
    """Dst row r = Src row RowSlots[r], cast to Dst's dtype (rows of row_len elements)."""
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < row_len
    slot = tl.load(RowSlots + row).to(tl.int64)
    x = tl.load(Src + slot * row_len + offs, mask=ok)
    tl.store(Dst + row.to(tl.int64) * row_len + offs, x.to(Dst.dtype.element_ty), mask=ok)


_launch_gather_cast = cached_launch(_gather_cast_kernel)


def gather_cast(src: torch.Tensor, row_slots: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[len(row_slots), *src.shape[1:]] in ``dtype``, row r being src's row row_slots[r]: in one
    pass, where a cast and then index_select take two (a cut plan's dQ, added by slot, back to
    rows). ``src`` contiguous."""
    out = torch.empty((row_slots.numel(), *src.shape[1:]), dtype=dtype, device=src.device)
    row_len = math.prod(src.shape[1:])
    if out.numel():
        key = (src.shape, src.dtype, out.shape, dtype) if src.is_cuda else None
        _launch_gather_cast((out.shape[0], triton.cdiv(row_len, GATHER_BLOCK)), key, src, out,
                            row_slots, row_len, BLOCK=GATHER_BLOCK)
    return out


@triton.jit
def _preprocess_kernel(Out, DOut, Lse, Delta, Lse2, RowMap, stride_om, stride_oh, stride_dm,
                       stride_dh, stride_lm, seqlen_q, seqlen_out, HEAD_DIM: tl.constexpr,
                       BLOCK: tl.constexpr, MAPPED: tl.constexpr):
    """Delta and Lse2 are [Hq, seqlen_out] (seqlen_out >= seqlen_q: rows past seqlen_q get
    delta 0 and lse2 +inf, i.e. P = 0, so a kernel may read them without a mask). MAPPED: slot
    p holds row RowMap[p] instead of row p, -1 none (delta 0, lse2 +inf): a plan's q_slot_rows,
    whose q tiles cut at the slices then read their own rows and no one else's."""
    head = tl.program_id(1)
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, HEAD_DIM)
    out_ok = offs_m < seqlen_out
    if MAPPED:
        src = tl.load(RowMap + offs_m, mask=out_ok, other=-1)
        row_ok = (src >= 0) & (src < seqlen_q)
    else:
        src = offs_m
        row_ok = offs_m < seqlen_q
    rows = src[:, None].to(tl.int64)
    o = tl.load(Out + head * stride_oh + rows * stride_om + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    do = tl.load(DOut + head * stride_dh + rows * stride_dm + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    lse = tl.load(Lse + src.to(tl.int64) * stride_lm + head, mask=row_ok, other=float("-inf"))
    lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
    tl.store(Delta + head.to(tl.int64) * seqlen_out + offs_m, delta, mask=out_ok)
    tl.store(Lse2 + head.to(tl.int64) * seqlen_out + offs_m, lse2, mask=out_ok)


@triton.jit
def _dkdv_step(dk, dv, k, v, Q, DO, Lse2, Delta, desc_q, desc_do, q_off, do_off, stat_off, q_col,
               q_tile, offs_k, offs_m0, offs_d, stride_qm, stride_dm, seqlen_q, sm_scale, softcap,
               slice_bounds, slice_idx, slice_lo, slice_hi, k_tile_lo, k_tile_hi, row_lo, row_hi,
               BLOCK_M: tl.constexpr, MASKED: tl.constexpr, SOFTCAP: tl.constexpr,
               ROW_INTERVALS: tl.constexpr, USE_TMA: tl.constexpr):
    q_lo = q_tile * BLOCK_M
    offs_m = q_lo + offs_m0
    rows = offs_m[:, None].to(tl.int64)
    row_ok = offs_m < seqlen_q
    if USE_TMA:  # rows past seqlen_q come back zero; their lse2 = +inf below gives P = 0
        q = desc_q.load([q_lo, q_col])
    elif MASKED:
        q = tl.load(Q + q_off + rows * stride_qm + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    else:
        q = tl.load(Q + q_off + rows * stride_qm + offs_d[None, :])
    if MASKED:
        lse2 = tl.load(Lse2 + stat_off + offs_m, mask=row_ok, other=float("inf"))
    else:
        lse2 = tl.load(Lse2 + stat_off + offs_m)
    qk_t = tl.dot(k, tl.trans(q))  # [BLOCK_N, BLOCK_M]
    if SOFTCAP:
        t = tanh(qk_t * (sm_scale / softcap))
        p_t = tl.exp2(t * (softcap * LOG2E) - lse2[None, :])
    else:
        p_t = tl.exp2(qk_t * (sm_scale * LOG2E) - lse2[None, :])
    if MASKED:
        if ROW_INTERVALS > 0:
            keep = row_table_mask(offs_m[None, :], offs_k[:, None], row_lo, row_hi, seqlen_q,
                                  ROW_INTERVALS)
        else:
            keep = union_mask(offs_m[None, :], offs_k[:, None], slice_bounds, slice_idx, slice_lo,
                              slice_hi, q_lo, q_lo + BLOCK_M, k_tile_lo, k_tile_hi)
        p_t = tl.where(keep, p_t, 0.0)
        delta = tl.load(Delta + stat_off + offs_m, mask=row_ok, other=0.0)
    else:
        delta = tl.load(Delta + stat_off + offs_m)
    if USE_TMA:
        do = desc_do.load([q_lo, q_col])
    elif MASKED:
        do = tl.load(DO + do_off + rows * stride_dm + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    else:
        do = tl.load(DO + do_off + rows * stride_dm + offs_d[None, :])
    dv = tl.dot(p_t.to(do.dtype), do, dv)
    dp_t = tl.dot(v, tl.trans(do))
    ds_t = p_t * (dp_t - delta[None, :])
    if SOFTCAP:
        ds_t = ds_t * (1.0 - t * t)
    ds_lp = ds_t.to(q.dtype)
    dk = tl.dot(ds_lp, q, dk)
    return dk, dv


@triton.jit
def _dkdv_program(pid_tile, kv_head, Q, K, V, DO, DK, DV, Lse2, Delta, desc_q, desc_k, desc_v,
                  desc_do,
                  k_tile_ptr, k_tile_qt, k_tile_num_full, k_tile_slice_ptr, k_tile_slice_idx,
                  slice_bounds, k_tile_order, row_lo, row_hi,
                  stride_qm, stride_qh, stride_km, stride_kh, stride_vm, stride_vh,
                  stride_dm, stride_dh, stride_dkm, stride_dkh, stride_dvm, stride_dvh,
                  seqlen_q, seqlen_k, sm_scale, softcap,
                  GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, SOFTCAP: tl.constexpr, ROW_INTERVALS: tl.constexpr,
                  PARTIAL_STAGES: tl.constexpr, USE_TMA: tl.constexpr):
    """dk, dv of the key tile at position ``pid_tile`` of the plan's order, for ``kv_head``."""
    tl.static_assert(HEAD_DIM % 16 == 0, "HEAD_DIM must be a multiple of 16")
    k_tile = tl.load(k_tile_order + pid_tile)
    k_lo = k_tile * BLOCK_N
    offs_k = k_lo + tl.arange(0, BLOCK_N)
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    col_ok = offs_k < seqlen_k
    krows = offs_k[:, None].to(tl.int64)
    if USE_TMA:
        k = desc_k.load([k_lo, kv_head * HEAD_DIM])
        v = desc_v.load([k_lo, kv_head * HEAD_DIM])
    else:
        k = tl.load(K + kv_head.to(tl.int64) * stride_kh + krows * stride_km + offs_d[None, :],
                    mask=col_ok[:, None], other=0.0)
        v = tl.load(V + kv_head.to(tl.int64) * stride_vh + krows * stride_vm + offs_d[None, :],
                    mask=col_ok[:, None], other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    start = tl.load(k_tile_ptr + k_tile)
    end = tl.load(k_tile_ptr + k_tile + 1)
    mid = start + tl.load(k_tile_num_full + k_tile)
    slice_lo = tl.load(k_tile_slice_ptr + k_tile)
    slice_hi = tl.load(k_tile_slice_ptr + k_tile + 1)
    num_full = mid - start
    for g in range(GROUP):
        head32 = kv_head * GROUP + g
        q_col = head32 * HEAD_DIM  # column of this head in the 2-D descriptor views
        head = head32.to(tl.int64)
        q_off = head * stride_qh
        do_off = head * stride_dh
        stat_off = head * seqlen_q
        for i in range(0, num_full):
            t = start + i
            dk, dv = _dkdv_step(dk, dv, k, v, Q, DO, Lse2, Delta, desc_q, desc_do, q_off, do_off,
                                stat_off, q_col, tl.load(k_tile_qt + t), offs_k, offs_m0, offs_d,
                                stride_qm, stride_dm, seqlen_q, sm_scale, softcap, slice_bounds,
                                k_tile_slice_idx, slice_lo, slice_hi, k_lo, k_lo + BLOCK_N,
                                row_lo, row_hi, BLOCK_M, False, SOFTCAP, ROW_INTERVALS, USE_TMA)
        for t in tl.range(mid, end, num_stages=PARTIAL_STAGES):
            dk, dv = _dkdv_step(dk, dv, k, v, Q, DO, Lse2, Delta, desc_q, desc_do, q_off, do_off,
                                stat_off, q_col, tl.load(k_tile_qt + t), offs_k, offs_m0, offs_d,
                                stride_qm, stride_dm, seqlen_q, sm_scale, softcap, slice_bounds,
                                k_tile_slice_idx, slice_lo, slice_hi, k_lo, k_lo + BLOCK_N,
                                row_lo, row_hi, BLOCK_M, True, SOFTCAP, ROW_INTERVALS, USE_TMA)
    dk = dk * sm_scale
    tl.store(DK + kv_head.to(tl.int64) * stride_dkh + krows * stride_dkm + offs_d[None, :],
             dk.to(DK.dtype.element_ty), mask=col_ok[:, None])
    tl.store(DV + kv_head.to(tl.int64) * stride_dvh + krows * stride_dvm + offs_d[None, :],
             dv.to(DV.dtype.element_ty), mask=col_ok[:, None])


@triton.jit
def _dkdv_kernel(Q, K, V, DO, DK, DV, Lse2, Delta, desc_q, desc_k, desc_v, desc_do,
                 k_tile_ptr, k_tile_qt, k_tile_num_full, k_tile_slice_ptr, k_tile_slice_idx,
                 slice_bounds, k_tile_order, row_lo, row_hi,
                 stride_qm, stride_qh, stride_km, stride_kh, stride_vm, stride_vh,
                 stride_dm, stride_dh, stride_dkm, stride_dkh, stride_dvm, stride_dvh,
                 seqlen_q, seqlen_k, sm_scale, softcap,
                 GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, SOFTCAP: tl.constexpr, ROW_INTERVALS: tl.constexpr,
                 PARTIAL_STAGES: tl.constexpr, USE_TMA: tl.constexpr):
    """Grid (key tiles, kv heads): one _dkdv_program each."""
    _dkdv_program(tl.program_id(0), tl.program_id(1), Q, K, V, DO, DK, DV, Lse2, Delta,
                  desc_q, desc_k, desc_v, desc_do,
                  k_tile_ptr, k_tile_qt, k_tile_num_full, k_tile_slice_ptr, k_tile_slice_idx,
                  slice_bounds, k_tile_order, row_lo, row_hi,
                  stride_qm, stride_qh, stride_km, stride_kh, stride_vm, stride_vh,
                  stride_dm, stride_dh, stride_dkm, stride_dkh, stride_dvm, stride_dvh,
                  seqlen_q, seqlen_k, sm_scale, softcap,
                  GROUP, HEAD_DIM, BLOCK_M, BLOCK_N, SOFTCAP, ROW_INTERVALS, PARTIAL_STAGES,
                  USE_TMA)


@triton.jit
def _dq_step(dq, q, do, lse2, delta, K, V, kv_off, k_tile, offs_m, offs_n, offs_d,
             stride_km, stride_vm, seqlen_k, sm_scale, softcap,
             slice_bounds, slice_idx, slice_lo, slice_hi, q_tile_lo, q_tile_hi,
             row_lo, row_hi, seqlen_q,
             BLOCK_N: tl.constexpr, MASKED: tl.constexpr, SOFTCAP: tl.constexpr,
             ROW_INTERVALS: tl.constexpr):
    k_lo = k_tile * BLOCK_N
    offs_k = k_lo + offs_n
    krows = offs_k[:, None].to(tl.int64)
    if MASKED:
        k = tl.load(K + kv_off + krows * stride_km + offs_d[None, :], mask=offs_k[:, None] < seqlen_k, other=0.0)
        v = tl.load(V + kv_off + krows * stride_vm + offs_d[None, :], mask=offs_k[:, None] < seqlen_k, other=0.0)
    else:
        k = tl.load(K + kv_off + krows * stride_km + offs_d[None, :])
        v = tl.load(V + kv_off + krows * stride_vm + offs_d[None, :])
    qk = tl.dot(q, tl.trans(k))
    if SOFTCAP:
        t = tanh(qk * (sm_scale / softcap))
        p = tl.exp2(t * (softcap * LOG2E) - lse2[:, None])
    else:
        p = tl.exp2(qk * (sm_scale * LOG2E) - lse2[:, None])
    if MASKED:
        if ROW_INTERVALS > 0:
            keep = row_table_mask(offs_m[:, None], offs_k[None, :], row_lo, row_hi, seqlen_q,
                                  ROW_INTERVALS)
        else:
            keep = union_mask(offs_m[:, None], offs_k[None, :], slice_bounds, slice_idx, slice_lo,
                              slice_hi, q_tile_lo, q_tile_hi, k_lo, k_lo + BLOCK_N)
        p = tl.where(keep, p, 0.0)
    dp = tl.dot(do, tl.trans(v))
    ds = p * (dp - delta[:, None])
    if SOFTCAP:
        ds = ds * (1.0 - t * t)
    dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq


@triton.jit
def _dq_program(pid_tile, head32, Q, K, V, DO, DQ, Lse2, Delta,
                q_tile_ptr, q_tile_kt, q_tile_num_full, q_tile_slice_ptr, q_tile_slice_idx,
                slice_bounds, q_tile_order, row_lo, row_hi,
                stride_qm, stride_qh, stride_km, stride_kh, stride_vm, stride_vh,
                stride_dm, stride_dh, stride_dqm, stride_dqh,
                seqlen_q, seqlen_k, sm_scale, softcap,
                GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, SOFTCAP: tl.constexpr, ROW_INTERVALS: tl.constexpr,
                PARTIAL_STAGES: tl.constexpr):
    """dq of the q tile at position ``pid_tile`` of the plan's order, for q head ``head32``."""
    tl.static_assert(HEAD_DIM % 16 == 0, "HEAD_DIM must be a multiple of 16")
    q_tile = tl.load(q_tile_order + pid_tile)
    head = head32.to(tl.int64)
    kv_off = (head // GROUP) * stride_kh
    q_lo = q_tile * BLOCK_M
    offs_m = q_lo + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seqlen_q
    rows = offs_m[:, None].to(tl.int64)
    q = tl.load(Q + head * stride_qh + rows * stride_qm + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + head * stride_dh + rows * stride_dm + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    lse2 = tl.load(Lse2 + head * seqlen_q + offs_m, mask=row_ok, other=float("inf"))
    delta = tl.load(Delta + head * seqlen_q + offs_m, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    start = tl.load(q_tile_ptr + q_tile)
    end = tl.load(q_tile_ptr + q_tile + 1)
    mid = start + tl.load(q_tile_num_full + q_tile)
    slice_lo = tl.load(q_tile_slice_ptr + q_tile)
    slice_hi = tl.load(q_tile_slice_ptr + q_tile + 1)
    for t in range(start, mid):
        dq = _dq_step(dq, q, do, lse2, delta, K, V, kv_off, tl.load(q_tile_kt + t), offs_m, offs_n,
                      offs_d, stride_km, stride_vm, seqlen_k, sm_scale, softcap, slice_bounds,
                      q_tile_slice_idx, slice_lo, slice_hi, q_lo, q_lo + BLOCK_M,
                      row_lo, row_hi, seqlen_q, BLOCK_N, False, SOFTCAP, ROW_INTERVALS)
    for t in tl.range(mid, end, num_stages=PARTIAL_STAGES):
        dq = _dq_step(dq, q, do, lse2, delta, K, V, kv_off, tl.load(q_tile_kt + t), offs_m, offs_n,
                      offs_d, stride_km, stride_vm, seqlen_k, sm_scale, softcap, slice_bounds,
                      q_tile_slice_idx, slice_lo, slice_hi, q_lo, q_lo + BLOCK_M,
                      row_lo, row_hi, seqlen_q, BLOCK_N, True, SOFTCAP, ROW_INTERVALS)
    dq = dq * sm_scale
    tl.store(DQ + head * stride_dqh + rows * stride_dqm + offs_d[None, :],
             dq.to(DQ.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def _dq_kernel(Q, K, V, DO, DQ, Lse2, Delta,
               q_tile_ptr, q_tile_kt, q_tile_num_full, q_tile_slice_ptr, q_tile_slice_idx,
               slice_bounds, q_tile_order, row_lo, row_hi,
               stride_qm, stride_qh, stride_km, stride_kh, stride_vm, stride_vh,
               stride_dm, stride_dh, stride_dqm, stride_dqh,
               seqlen_q, seqlen_k, sm_scale, softcap,
               GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, SOFTCAP: tl.constexpr, ROW_INTERVALS: tl.constexpr,
               PARTIAL_STAGES: tl.constexpr):
    """Grid (q tiles, q heads): one _dq_program each."""
    _dq_program(tl.program_id(0), tl.program_id(1), Q, K, V, DO, DQ, Lse2, Delta,
                q_tile_ptr, q_tile_kt, q_tile_num_full, q_tile_slice_ptr, q_tile_slice_idx,
                slice_bounds, q_tile_order, row_lo, row_hi,
                stride_qm, stride_qh, stride_km, stride_kh, stride_vm, stride_vh,
                stride_dm, stride_dh, stride_dqm, stride_dqh, seqlen_q, seqlen_k, sm_scale, softcap,
                GROUP, HEAD_DIM, BLOCK_M, BLOCK_N, SOFTCAP, ROW_INTERVALS, PARTIAL_STAGES)


launch_preprocess = cached_launch(_preprocess_kernel)
_launch_dkdv = cached_launch(_dkdv_kernel)
_launch_dq = cached_launch(_dq_kernel)


def launch_bwd(dout, q, k, v, out, lse, plan_kv: BlockSparsePlan, plan_q: BlockSparsePlan,
               config: BwdConfig, softmax_scale: float, softcap: float):
    """dout, q [Sq, Hq, D]; k, v [Sk, Hkv, D]; out like q, lse [Sq, Hq] fp32 -> (dq, dk, dv).

    plan_kv: tiles (block_m1, block_n1), read through its transpose, for the dk/dv programs;
    plan_q: tiles (block_m2, block_n2) for the dq programs.
    """
    seqlen_q, num_heads_q, head_dim = q.shape
    seqlen_k, num_heads_kv, _ = k.shape
    group = num_heads_q // num_heads_kv
    if (plan_kv.block_m, plan_kv.block_n) != (config.block_m1, config.block_n1):
        raise ValueError(f"plan_kv tiles {(plan_kv.block_m, plan_kv.block_n)} != config tiles "
                         f"{(config.block_m1, config.block_n1)}")
    if (plan_q.block_m, plan_q.block_n) != (config.block_m2, config.block_n2):
        raise ValueError(f"plan_q tiles {(plan_q.block_m, plan_q.block_n)} != config tiles "
                         f"{(config.block_m2, config.block_n2)}")
    delta = torch.empty(num_heads_q, seqlen_q, dtype=torch.float32, device=q.device)
    lse2 = torch.empty_like(delta)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    if seqlen_q == 0 or seqlen_k == 0:
        return torch.zeros_like(q), dk.zero_(), dv.zero_()
    dq = torch.empty_like(q)
    cap = softcap if softcap > 0 else 1.0
    descs = (None,) * 4
    if config.use_tma:  # loads of the dk/dv programs
        m, n = config.block_m1, config.block_n1
        descs = (descriptor_2d(q, m), descriptor_2d(k, n), descriptor_2d(v, n),
                 descriptor_2d(dout, m))
    # every integer argument of the kernels below follows from these (cached_launch)
    key = ((q.shape, q.stride(), k.shape, k.stride(), v.stride(), dout.stride(), out.stride(),
            lse.stride(), q.dtype, config, softcap > 0, plan_kv.num_k_tiles,
            plan_kv.row_lo.shape[1], plan_q.num_q_tiles, plan_q.row_lo.shape[1])
           if q.is_cuda else None)
    launch_preprocess((triton.cdiv(seqlen_q, PREPROCESS_BLOCK), num_heads_q), key,
                      out, dout, lse, delta, lse2, delta, out.stride(0), out.stride(1),
                      dout.stride(0), dout.stride(1), lse.stride(0), seqlen_q, seqlen_q,
                      HEAD_DIM=head_dim, BLOCK=PREPROCESS_BLOCK, MAPPED=False)
    _launch_dkdv((plan_kv.num_k_tiles, num_heads_kv), key,
        q, k, v, dout, dk, dv, lse2, delta, *descs,
        plan_kv.k_tile_ptr, plan_kv.k_tile_qt, plan_kv.k_tile_num_full, plan_kv.k_tile_slice_ptr,
        plan_kv.k_tile_slice_idx, plan_kv.slice_bounds, plan_kv.k_tile_order, plan_kv.row_lo,
        plan_kv.row_hi,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        dout.stride(0), dout.stride(1), dk.stride(0), dk.stride(1), dv.stride(0), dv.stride(1),
        seqlen_q, seqlen_k, softmax_scale, cap,
        GROUP=group, HEAD_DIM=head_dim, BLOCK_M=config.block_m1, BLOCK_N=config.block_n1,
        SOFTCAP=softcap > 0, ROW_INTERVALS=plan_kv.row_lo.shape[1],
        PARTIAL_STAGES=config.partial_stages, USE_TMA=config.use_tma, **launch_options(config))
    _launch_dq((plan_q.num_q_tiles, num_heads_q), key,
        q, k, v, dout, dq, lse2, delta,
        plan_q.q_tile_ptr, plan_q.q_tile_kt, plan_q.q_tile_num_full, plan_q.q_tile_slice_ptr,
        plan_q.q_tile_slice_idx, plan_q.slice_bounds, plan_q.q_tile_order, plan_q.row_lo,
        plan_q.row_hi,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        dout.stride(0), dout.stride(1), dq.stride(0), dq.stride(1),
        seqlen_q, seqlen_k, softmax_scale, cap,
        GROUP=group, HEAD_DIM=head_dim, BLOCK_M=config.block_m2, BLOCK_N=config.block_n2,
        SOFTCAP=softcap > 0, ROW_INTERVALS=plan_q.row_lo.shape[1],
        PARTIAL_STAGES=config.partial_stages, **launch_options(config))
    return dq, dk, dv
