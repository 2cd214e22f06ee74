"""Forward Triton kernel of FFA: one program per (q tile, q head), over the key tiles of the
slice union that the block-sparse plan lists for its q tile (full tiles unmasked, then partial
tiles masked by the OR of the q tile's slices). Online softmax in fp32 with exp2.

Two load paths, chosen by ``FwdConfig.use_tma``: pointer loads (any Triton GPU), or tensor
descriptors (TMA on sm90+: one bulk copy per tile, zero-filled past the sequence end, so no load
masks; Q, K, V, Out viewed as 2-D [seqlen, heads * head_dim] with one head per column block).
With ``FwdConfig.pack_gqa`` a program holds the q heads of one kv head (PackGQA)."""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ..block_sparse import BlockSparsePlan
from .launch import cached_launch
from ._mask import LN2, LOG2E, row_table_mask, tanh, union_mask
from ._tma import descriptor_2d
from .configs import FwdConfig, launch_options


@triton.jit
def _load_tile(X, desc_x, kv_off, kv_col, k_lo, offs_n, offs_d, stride_xm, seqlen_k,
               MASKED: tl.constexpr, USE_TMA: tl.constexpr):
    """A K or V tile; MASKED: rows past seqlen_k read as zero (TMA zero-fills them itself)."""
    if USE_TMA:
        x = desc_x.load([k_lo, kv_col])
    else:
        offs_k = k_lo + offs_n
        ptrs = X + kv_off + offs_k[:, None] * stride_xm + offs_d[None, :]
        if MASKED:
            x = tl.load(ptrs, mask=offs_k[:, None] < seqlen_k, other=0.0)
        else:
            x = tl.load(ptrs)
    return x


@triton.jit
def _fwd_softmax_pv(acc, l_i, m_i, qk, v, qk_scale):
    """Online softmax of an unmasked, uncapped score tile, then acc += P V."""
    m_tile = tl.max(qk, 1) * qk_scale
    m_new = tl.maximum(m_i, m_tile)
    p = tl.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])  # accumulate inside the MMA
    m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _fwd_tile(acc, l_i, m_i, q, K, V, desc_k, desc_v, kv_off, kv_col, k_tile, offs_m, offs_n,
              offs_d, stride_km, stride_vm, seqlen_k, sm_scale, softcap,
              slice_bounds, slice_idx, slice_lo, slice_hi, q_tile_lo, q_tile_hi,
              row_lo, row_hi, seqlen_q,
              BLOCK_N: tl.constexpr, MASKED: tl.constexpr, SOFTCAP: tl.constexpr,
              ROW_INTERVALS: tl.constexpr, USE_TMA: tl.constexpr):
    k_lo = k_tile * BLOCK_N
    offs_k = k_lo + offs_n
    if not MASKED and not SOFTCAP:
        k = _load_tile(K, desc_k, kv_off, kv_col, k_lo, offs_n, offs_d, stride_km, seqlen_k,
                       False, USE_TMA)
        qk = tl.dot(q, tl.trans(k))
        v = _load_tile(V, desc_v, kv_off, kv_col, k_lo, offs_n, offs_d, stride_vm, seqlen_k,
                       False, USE_TMA)
        acc, l_i, m_i = _fwd_softmax_pv(acc, l_i, m_i, qk, v, sm_scale * LOG2E)
    else:
        k = _load_tile(K, desc_k, kv_off, kv_col, k_lo, offs_n, offs_d, stride_km, seqlen_k,
                       MASKED, USE_TMA)
        qk = tl.dot(q, tl.trans(k))
        if SOFTCAP:
            s = tanh(qk * (sm_scale / softcap)) * (softcap * LOG2E)
        else:
            s = qk * (sm_scale * LOG2E)
        if MASKED:
            if ROW_INTERVALS > 0:
                keep = row_table_mask(offs_m[:, None], offs_k[None, :], row_lo, row_hi, seqlen_q,
                                      ROW_INTERVALS)
            else:
                keep = union_mask(offs_m[:, None], offs_k[None, :], slice_bounds, slice_idx, slice_lo,
                                  slice_hi, q_tile_lo, q_tile_hi, k_lo, k_lo + BLOCK_N)
            s = tl.where(keep, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with nothing kept yet
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_use = m_new
        p = tl.exp2(s - m_use[:, None])
        alpha = tl.exp2(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _load_tile(V, desc_v, kv_off, kv_col, k_lo, offs_n, offs_d, stride_vm, seqlen_k,
                       MASKED, USE_TMA)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])  # accumulate inside the MMA
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _fwd_full_tiles(acc, l_i, m_i, q, K, V, desc_k, desc_v, kv_off, kv_col, q_tile_kt, start, mid,
                    offs_m, offs_n, offs_d, stride_km, stride_vm, seqlen_k, sm_scale, softcap,
                    row_lo, row_hi, seqlen_q,
                    BLOCK_N: tl.constexpr, SOFTCAP: tl.constexpr, USE_TMA: tl.constexpr):
    """The unmasked key tiles start..mid of the plan's list."""
    for t in tl.range(start, mid):
        acc, l_i, m_i = _fwd_tile(acc, l_i, m_i, q, K, V, desc_k, desc_v, kv_off, kv_col,
                                  tl.load(q_tile_kt + t), offs_m, offs_n, offs_d, stride_km,
                                  stride_vm, seqlen_k, sm_scale, softcap, 0, 0, 0, 0, 0, 0,
                                  row_lo, row_hi, seqlen_q, BLOCK_N, False, SOFTCAP, 0, USE_TMA)
    return acc, l_i, m_i


@triton.jit
def _fwd_kernel(Q, K, V, Out, Lse, MaxLogit, desc_q, desc_k, desc_v, desc_o,
                q_tile_ptr, q_tile_kt, q_tile_num_full, q_tile_slice_ptr, q_tile_slice_idx,
                slice_bounds, q_tile_order, row_lo, row_hi,
                stride_qm, stride_qh, stride_km, stride_kh, stride_vm, stride_vh,
                stride_om, stride_oh, stride_lm, stride_xt,
                seqlen_q, seqlen_k, sm_scale, softcap,
                GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, SOFTCAP: tl.constexpr, RETURN_MAX: tl.constexpr,
                ROW_INTERVALS: tl.constexpr, PARTIAL_STAGES: tl.constexpr,
                USE_TMA: tl.constexpr, PACK_GQA: tl.constexpr):
    tl.static_assert(HEAD_DIM % 16 == 0, "HEAD_DIM must be a multiple of 16")
    tl.static_assert(BLOCK_M % 16 == 0 and BLOCK_N % 16 == 0)
    q_tile = tl.load(q_tile_order + tl.program_id(0))
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    if PACK_GQA:
        # one program per (q tile, kv head): its BLOCK_M rows are BLOCK_M // GROUP positions x
        # the GROUP q heads of the kv head (row r: position r // GROUP, head r % GROUP), so a
        # K/V tile is loaded once for the group and the plan's q tiles are GROUP times shorter
        tl.static_assert(BLOCK_M % GROUP == 0)
        kv_head = tl.program_id(1)
        rows = tl.arange(0, BLOCK_M)
        q_tile_lo = q_tile * (BLOCK_M // GROUP)  # positions, as the plan counts them
        q_tile_hi = q_tile_lo + BLOCK_M // GROUP
        offs_m = q_tile_lo + rows // GROUP
        head = kv_head * GROUP + rows % GROUP  # per row
        head_off = head[:, None].to(tl.int64)
    else:
        head = tl.program_id(1)
        kv_head = head // GROUP
        q_tile_lo = q_tile * BLOCK_M
        q_tile_hi = q_tile_lo + BLOCK_M
        offs_m = q_tile_lo + tl.arange(0, BLOCK_M)
        head_off = head.to(tl.int64)
    kv_off = kv_head.to(tl.int64) * stride_kh
    kv_col = kv_head * HEAD_DIM  # column of this kv head in the 2-D descriptor view
    row_ok = offs_m < seqlen_q
    q_ptrs = Q + head_off * stride_qh + offs_m[:, None].to(tl.int64) * stride_qm + offs_d[None, :]
    if USE_TMA and not PACK_GQA:  # packed rows are not one [BLOCK_M, D] box: Q by pointers
        q = desc_q.load([q_tile_lo, head * HEAD_DIM])
    else:
        q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)

    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    start = tl.load(q_tile_ptr + q_tile)
    end = tl.load(q_tile_ptr + q_tile + 1)
    mid = start + tl.load(q_tile_num_full + q_tile)
    slice_lo = tl.load(q_tile_slice_ptr + q_tile)
    slice_hi = tl.load(q_tile_slice_ptr + q_tile + 1)
    acc, l_i, m_i = _fwd_full_tiles(
        acc, l_i, m_i, q, K, V, desc_k, desc_v, kv_off, kv_col, q_tile_kt, start, mid, offs_m,
        offs_n, offs_d, stride_km, stride_vm, seqlen_k, sm_scale, softcap, row_lo, row_hi,
        seqlen_q, BLOCK_N, SOFTCAP, USE_TMA)
    for t in tl.range(mid, end, num_stages=PARTIAL_STAGES):
        acc, l_i, m_i = _fwd_tile(acc, l_i, m_i, q, K, V, desc_k, desc_v, kv_off, kv_col,
                                  tl.load(q_tile_kt + t),
                                  offs_m, offs_n, offs_d, stride_km, stride_vm, seqlen_k,
                                  sm_scale, softcap, slice_bounds, q_tile_slice_idx, slice_lo,
                                  slice_hi, q_tile_lo, q_tile_hi, row_lo, row_hi, seqlen_q,
                                  BLOCK_N, True, SOFTCAP, ROW_INTERVALS, USE_TMA)

    has_keys = l_i > 0.0
    l_safe = tl.where(has_keys, l_i, 1.0)
    out = acc / l_safe[:, None]
    lse = tl.where(has_keys, (m_i + tl.log2(l_safe)) * LN2, float("-inf"))
    if USE_TMA and not PACK_GQA:
        desc_o.store([q_tile_lo, head * HEAD_DIM], out.to(Out.dtype.element_ty))  # clipped at Sq
    else:
        o_ptrs = Out + head_off * stride_oh + offs_m[:, None].to(tl.int64) * stride_om + offs_d[None, :]
        tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None])
    tl.store(Lse + offs_m.to(tl.int64) * stride_lm + head, lse, mask=row_ok)
    if RETURN_MAX:  # not with PACK_GQA (launch_fwd): a row's head varies there
        # m_i is the running row max of the logits in log2 units
        tl.store(MaxLogit + q_tile * stride_xt + head, tl.max(m_i, 0) / LOG2E)


_launch_fwd_kernel = cached_launch(_fwd_kernel)


def pack_gqa_reason(config: FwdConfig, num_heads_q: int, num_heads_kv: int,
                    return_max_logits: bool) -> str | None:
    """Why ``config.pack_gqa`` cannot run these heads, or None: a q tile must hold whole groups
    (block_m a multiple of the group), and the max logits are kept per (q tile, head)."""
    group = num_heads_q // num_heads_kv
    if config.block_m % group:
        return f"PackGQA needs block_m ({config.block_m}) a multiple of the GQA group ({group})"
    if return_max_logits:
        return "PackGQA does not return max logits (a packed tile mixes heads)"
    return None


def launch_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: BlockSparsePlan,
               config: FwdConfig, softmax_scale: float, softcap: float, return_max_logits: bool):
    """q [Sq, Hq, D], k/v [Sk, Hkv, D] (last dim contiguous) -> (out, lse [Sq, Hq] fp32, max_logits)."""
    seqlen_q, num_heads_q, head_dim = q.shape
    seqlen_k, num_heads_kv, _ = k.shape
    group = num_heads_q // num_heads_kv
    pack = config.pack_gqa
    if pack:
        reason = pack_gqa_reason(config, num_heads_q, num_heads_kv, return_max_logits)
        if reason is not None:
            raise ValueError(reason)
    plan_m = config.block_m // group if pack else config.block_m  # positions per q tile
    if (plan.block_m, plan.block_n) != (plan_m, config.block_n):
        raise ValueError(f"plan tiles {(plan.block_m, plan.block_n)} != config tiles "
                         f"{(plan_m, config.block_n)}")
    use_tma = config.use_tma and seqlen_k > 0 and seqlen_q > 0
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # packed: TMA stores need it
    lse = torch.empty(seqlen_q, num_heads_q, dtype=torch.float32, device=q.device)
    tile_max = torch.empty(max(plan.num_q_tiles, 1), num_heads_q, dtype=torch.float32, device=q.device)
    grid = (plan.num_q_tiles, num_heads_kv if pack else num_heads_q)
    descs = (None, None, None, None)
    if use_tma:  # PackGQA's rows are not [block_m, D] boxes: its Q and O go by pointers
        descs = (None if pack else descriptor_2d(q, config.block_m),
                 descriptor_2d(k, config.block_n), descriptor_2d(v, config.block_n),
                 None if pack else descriptor_2d(out, config.block_m, writable=True))
    if plan.num_q_tiles > 0:
        # every integer argument follows from these (cached_launch)
        key = ((q.shape, q.stride(), k.shape, k.stride(), v.stride(), q.dtype, config,
                plan.num_q_tiles, plan.row_lo.shape[1], softcap > 0, return_max_logits, use_tma)
               if q.is_cuda else None)
        _launch_fwd_kernel(grid, key,
            q, k, v, out, lse, tile_max, *descs,
            plan.q_tile_ptr, plan.q_tile_kt, plan.q_tile_num_full, plan.q_tile_slice_ptr,
            plan.q_tile_slice_idx, plan.slice_bounds, plan.q_tile_order, plan.row_lo, plan.row_hi,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
            out.stride(0), out.stride(1), lse.stride(0), tile_max.stride(0),
            seqlen_q, seqlen_k, softmax_scale, softcap if softcap > 0 else 1.0,
            GROUP=num_heads_q // num_heads_kv, HEAD_DIM=head_dim, BLOCK_M=config.block_m,
            BLOCK_N=config.block_n, SOFTCAP=softcap > 0, RETURN_MAX=return_max_logits,
            ROW_INTERVALS=plan.row_lo.shape[1], PARTIAL_STAGES=config.partial_stages,
            USE_TMA=use_tma, PACK_GQA=pack,
            **launch_options(config))
    max_logits = None
    if return_max_logits:
        max_logits = (tile_max.amax(dim=0) if plan.num_q_tiles > 0
                      else torch.full((num_heads_q,), -math.inf, device=q.device))
    return out, lse, max_logits
