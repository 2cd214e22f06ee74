"""Proof of concept, NOT YET RUN ON A GPU (written and compiled for sm90 on the CPU machine in
session 21; the next session runs it first): a one-pass attention backward in Gluon, to learn
whether FlashAttention-3's backward structure takes FFA's backward past 0.75x FA4 (issue 14),
where the Triton kernels stop at 0.52-0.62x (notes/ffa_triton.md, session 21).

Full mask only. One program per (128-key tile, kv head), three partitions:
- a producer warp loads the two 64-key halves of K and V once, then Q_i and dO_i (64 q rows)
  of every q tile and every q head of the group into a NUM_BUF-slot ring;
- two consumer warpgroups own 64 keys each and hold their dK, dV (fp32, 64 registers each). Per
  step: S^T = K_c Q_i^T, P^T = exp2(S^T * scale - lse_i), dP^T = V_c dO_i^T, dV_c += P^T dO_i,
  dS^T = P^T (dP^T - delta_i), dK_c += dS^T Q_i, and dQ_i += dS K_c added to an fp32 dQ buffer by
  element-wise atomics, in two 64-column halves (32 registers each) from dS^T staged in shared
  memory. 5 MMAs per step where the two-kernel path needs 7.
The atomics are issued by the consumers here (simplest first); if they stall them, the next step
is a writer partition (Gluon 3.6 on Hopper has no TMA reduce-add).

    python scripts/dev/gluon_bwd_poc.py --out $OUT     # check against torch, then time vs Triton and FA4
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                              warpgroup_mma, warpgroup_mma_wait)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from magi_attention.kernels.triton.gluon_forward import _descriptor  # noqa: E402

LOG2E = 1.4426950408889634
HALF_N = 64  # keys per consumer warpgroup
BLOCK_M = 64  # q rows per step


@gluon.jit
def _producer(q_desc, k_desc, v_desc, do_desc, DQ, Lse2, Delta, seqlen_q, num_heads_q, n_steps,
              k_row, kv_col, group, sm_scale, k_smem, v_smem, q_smem, do_smem, kv_bar, ready,
              empty, ds_smem):
    HALF_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = k_desc.block_type.shape[1]
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    NUM_BUF: gl.constexpr = q_smem.type.shape[0]
    mbarrier.expect(kv_bar, 2 * k_desc.block_type.nbytes + 2 * v_desc.block_type.nbytes)
    for c in gl.static_range(2):
        tma.async_copy_global_to_shared(k_desc, [k_row + c * HALF_N, kv_col], kv_bar, k_smem.index(c))
        tma.async_copy_global_to_shared(v_desc, [k_row + c * HALF_N, kv_col], kv_bar, v_smem.index(c))
    n_q_tiles = gl.cdiv(seqlen_q, BLOCK_M)
    for j in range(n_steps):
        slot = j % NUM_BUF
        head = (kv_col // HEAD_DIM) * group + j // n_q_tiles
        q_lo = (j % n_q_tiles) * BLOCK_M
        mbarrier.wait(empty.index(slot), ((j // NUM_BUF) & 1) ^ 1)
        mbarrier.expect(ready.index(slot), q_desc.block_type.nbytes + do_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q_lo, head * HEAD_DIM], ready.index(slot),
                                        q_smem.index(slot))
        tma.async_copy_global_to_shared(do_desc, [q_lo, head * HEAD_DIM], ready.index(slot),
                                        do_smem.index(slot))


@gluon.jit
def _consumer(q_desc, k_desc, v_desc, do_desc, DQ, Lse2, Delta, seqlen_q, num_heads_q, n_steps,
              k_row, kv_col, group, sm_scale, k_smem, v_smem, q_smem, do_smem, kv_bar, ready,
              empty, ds_smem, c: gl.constexpr):
    HALF_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = k_desc.block_type.shape[1]
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    NUM_BUF: gl.constexpr = q_smem.type.shape[0]
    dtype: gl.constexpr = k_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, HEAD_DIM, 16])
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, HEAD_DIM // 2, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    col_s: gl.constexpr = gl.SliceLayout(0, s_layout)
    k_c = k_smem.index(c)
    v_c = v_smem.index(c)
    ds_c = ds_smem.index(c)
    n_q_tiles = gl.cdiv(seqlen_q, BLOCK_M)
    qk_scale = sm_scale * 1.4426950408889634
    s_zero = gl.zeros([HALF_N, BLOCK_M], gl.float32, s_layout)
    dq_zero = gl.zeros([BLOCK_M, HEAD_DIM // 2], gl.float32, dq_layout)
    dk = gl.zeros([HALF_N, HEAD_DIM], gl.float32, acc_layout)
    dv = gl.zeros([HALF_N, HEAD_DIM], gl.float32, acc_layout)
    dq_rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, dq_layout))
    dq_cols = gl.arange(0, HEAD_DIM // 2, layout=gl.SliceLayout(0, dq_layout))
    mbarrier.wait(kv_bar, 0)
    for j in range(n_steps):
        slot = j % NUM_BUF
        head = (kv_col // HEAD_DIM) * group + j // n_q_tiles
        q_lo = (j % n_q_tiles) * BLOCK_M
        q_i = q_smem.index(slot)
        do_i = do_smem.index(slot)
        mbarrier.wait(ready.index(slot), (j // NUM_BUF) & 1)
        cols = q_lo + gl.arange(0, BLOCK_M, layout=col_s)
        col_ok = cols < seqlen_q
        lse2 = gl.load(Lse2 + head.to(gl.int64) * seqlen_q + cols, mask=col_ok, other=float("inf"))
        delta = gl.load(Delta + head.to(gl.int64) * seqlen_q + cols, mask=col_ok, other=0.0)
        st = warpgroup_mma(k_c, q_i.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        dpt = warpgroup_mma(v_c, do_i.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        st = warpgroup_mma_wait(num_outstanding=1, deps=(st, ))
        pt = gl.exp2(st * qk_scale - gl.expand_dims(lse2, 0))
        pt_op = gl.convert_layout(pt.to(dtype), op_layout)
        dv = warpgroup_mma(pt_op, do_i, dv, is_async=True)
        dpt, dv = warpgroup_mma_wait(num_outstanding=0, deps=(dpt, dv))
        dst = pt * (dpt - gl.expand_dims(delta, 0))
        ds_lp = dst.to(dtype)
        ds_c.store(ds_lp)  # dS^T staged: the dQ MMA reads it transposed
        fence_async_shared()
        dk = warpgroup_mma(gl.convert_layout(ds_lp, op_layout), q_i, dk, is_async=True)
        dq_ptr = DQ + (q_lo + gl.expand_dims(dq_rows, 1)).to(gl.int64) * (num_heads_q * HEAD_DIM) \
            + head * HEAD_DIM + gl.expand_dims(dq_cols, 0)
        dq_ok = gl.expand_dims(q_lo + dq_rows < seqlen_q, 1)
        for h in gl.static_range(2):
            k_half = k_c.slice(h * (HEAD_DIM // 2), HEAD_DIM // 2, dim=1)
            dq = warpgroup_mma(ds_c.permute((1, 0)), k_half, dq_zero, use_acc=False, is_async=True)
            dq = warpgroup_mma_wait(num_outstanding=1, deps=(dq, ))  # dK's MMA may still run
            gl.atomic_add(dq_ptr + h * (HEAD_DIM // 2), dq * sm_scale, mask=dq_ok, sem="relaxed")
        dk = warpgroup_mma_wait(num_outstanding=0, deps=(dk, ))
        mbarrier.arrive(empty.index(slot), count=1)
    return dk, dv


@gluon.jit
def _consumer0(q_desc, k_desc, v_desc, do_desc, DQ, Lse2, Delta, seqlen_q, num_heads_q, n_steps,
               k_row, kv_col, group, sm_scale, k_smem, v_smem, q_smem, do_smem, kv_bar, ready,
               empty, ds_smem, DK, DV):
    dk, dv = _consumer(q_desc, k_desc, v_desc, do_desc, DQ, Lse2, Delta, seqlen_q, num_heads_q,
                       n_steps, k_row, kv_col, group, sm_scale, k_smem, v_smem, q_smem, do_smem,
                       kv_bar, ready, empty, ds_smem, 0)
    _store_dkdv(dk, dv, DK, DV, k_row, kv_col, (num_heads_q // group), sm_scale, k_desc)


@gluon.jit
def _consumer1(q_desc, k_desc, v_desc, do_desc, DQ, Lse2, Delta, seqlen_q, num_heads_q, n_steps,
               k_row, kv_col, group, sm_scale, k_smem, v_smem, q_smem, do_smem, kv_bar, ready,
               empty, ds_smem, DK, DV):
    dk, dv = _consumer(q_desc, k_desc, v_desc, do_desc, DQ, Lse2, Delta, seqlen_q, num_heads_q,
                       n_steps, k_row, kv_col, group, sm_scale, k_smem, v_smem, q_smem, do_smem,
                       kv_bar, ready, empty, ds_smem, 1)
    _store_dkdv(dk, dv, DK, DV, k_row + k_desc.block_type.shape[0], kv_col, (num_heads_q // group),
                sm_scale, k_desc)


@gluon.jit
def _producer_w(q_desc, k_desc, v_desc, do_desc, DQ, Lse2, Delta, seqlen_q, num_heads_q, n_steps,
                k_row, kv_col, group, sm_scale, k_smem, v_smem, q_smem, do_smem, kv_bar, ready,
                empty, ds_smem, DK, DV):
    _producer(q_desc, k_desc, v_desc, do_desc, DQ, Lse2, Delta, seqlen_q, num_heads_q, n_steps,
              k_row, kv_col, group, sm_scale, k_smem, v_smem, q_smem, do_smem, kv_bar, ready,
              empty, ds_smem)


@gluon.jit
def _store_dkdv(dk, dv, DK, DV, row0, col0, num_heads_kv, sm_scale, k_desc):
    """This consumer's rows of dK (the sum of dS^T Q, times the softmax scale here) and dV."""
    HALF_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = k_desc.block_type.shape[1]
    layout: gl.constexpr = dk.type.layout
    rows = row0 + gl.arange(0, HALF_N, layout=gl.SliceLayout(1, layout))
    cols = col0 + gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, layout))
    offs = gl.expand_dims(rows, 1).to(gl.int64) * (num_heads_kv * HEAD_DIM) + gl.expand_dims(cols, 0)
    gl.store(DK + offs, (dk * sm_scale).to(DK.dtype.element_ty))
    gl.store(DV + offs, dv.to(DV.dtype.element_ty))


@gluon.jit
def _bwd_kernel(q_desc, k_desc, v_desc, do_desc, DQ, DK, DV, Lse2, Delta, seqlen_q, num_heads_q,
                sm_scale, GROUP: gl.constexpr, NUM_BUF: gl.constexpr, num_warps: gl.constexpr):
    HALF_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = k_desc.block_type.shape[1]
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    dtype: gl.constexpr = k_desc.dtype
    k_row = gl.program_id(0) * 2 * HALF_N
    kv_col = gl.program_id(1) * HEAD_DIM
    n_steps = GROUP * gl.cdiv(seqlen_q, BLOCK_M)
    k_smem = gl.allocate_shared_memory(dtype, [2, HALF_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [2, HALF_N, HEAD_DIM], v_desc.layout)
    q_smem = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_M, HEAD_DIM], q_desc.layout)
    do_smem = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_M, HEAD_DIM], do_desc.layout)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HALF_N, BLOCK_M], dtype)
    ds_smem = gl.allocate_shared_memory(dtype, [2, HALF_N, BLOCK_M], ds_layout)
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for i in gl.static_range(NUM_BUF):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # both consumers release a slot
    fence_async_shared()
    args = (q_desc, k_desc, v_desc, do_desc, DQ, Lse2, Delta, seqlen_q, num_heads_q, n_steps,
            k_row, kv_col, GROUP, sm_scale, k_smem, v_smem, q_smem, do_smem, kv_bar, ready, empty,
            ds_smem, DK, DV)
    gl.warp_specialize([(_consumer0, args), (_consumer1, args), (_producer_w, args)], [4, 1],
                       [240, 24])


def attn_bwd(do, q, k, v, out, lse, softmax_scale, num_buf=2):
    """Full-mask backward: (dq, dk, dv). lse [Sq, Hq] natural log (the forward's)."""
    sq, hq, d = q.shape
    sk, hk, _ = k.shape
    if sk % (2 * HALF_N):
        raise ValueError(f"this proof of concept wants seqlen_k a multiple of {2 * HALF_N}")
    delta = (out.float() * do.float()).sum(-1).t().contiguous()  # [Hq, Sq]
    lse2 = (lse.float() * LOG2E).t().contiguous()
    dq = torch.zeros(sq, hq, d, dtype=torch.float32, device=q.device)
    dk = torch.empty(sk, hk, d, dtype=q.dtype, device=q.device)
    dv = torch.empty_like(dk)
    _bwd_kernel[(sk // (2 * HALF_N), hk)](
        _descriptor(q, BLOCK_M), _descriptor(k, HALF_N), _descriptor(v, HALF_N),
        _descriptor(do, BLOCK_M), dq, dk, dv, lse2, delta, sq, hq, float(softmax_scale),
        GROUP=hq // hk, NUM_BUF=num_buf, num_warps=4, maxnreg=168)
    return dq.to(q.dtype), dk, dv


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--seqlens", type=int, nargs="+", default=[16384, 65536])
    args = p.parse_args()
    from ffa_triton_sweep import time_ms
    rows = []
    path = os.path.join(args.out, "gluon_bwd_poc.csv")
    f = open(path, "w", newline="")
    w = csv.DictWriter(f, ["kernel", "seqlen", "status", "runtime_ms", "tflops_per_s", "message"])
    w.writeheader()

    def row(**kw):
        w.writerow(kw)
        f.flush()
        rows.append(kw)
        print(kw, flush=True)

    d, scale = 128, 128 ** -0.5
    for sq, hq, hk in ((1024, 8, 2), (2048, 4, 4)):
        q, k, v, do = (torch.randn(sq, h, d, device="cuda").bfloat16() for h in (hq, hk, hk, hq))
        qr, kr, vr = (t.float().requires_grad_() for t in (q, k, v))
        g = hq // hk
        s = torch.einsum("qhd,khd->hqk", qr, kr.repeat_interleave(g, 1)) * scale
        o = torch.einsum("hqk,khd->qhd", s.softmax(-1), vr.repeat_interleave(g, 1))
        ref = torch.autograd.grad(o, (qr, kr, vr), do.float())
        lse = torch.logsumexp(s, -1).t().contiguous()
        try:
            got = attn_bwd(do, q, k, v, o.detach().to(q.dtype), lse, scale)
            errs = [((a.float() - b).norm() / b.norm()).item() for a, b in zip(got, ref)]
            row(kernel="gluon_bwd", seqlen=sq, status="check_ok" if max(errs) < 2e-2 else "check_fail",
                message="dq/dk/dv rel " + " ".join(f"{e:.2e}" for e in errs))
        except Exception as e:  # noqa: BLE001
            row(kernel="gluon_bwd", seqlen=sq, status="error", message=f"{type(e).__name__}: {str(e)[:400]}")
    hq, hk = 64, 8
    for seqlen in args.seqlens:
        q, k, v, do = (torch.randn(seqlen, h, d, device="cuda").bfloat16() for h in (hq, hk, hk, hq))
        out = torch.randn_like(q)
        lse = torch.randn(seqlen, hq, device="cuda") + 10
        flops = 2.5 * 4 * seqlen * seqlen * hq * d  # the bench's backward count (2.5x forward)
        fns = {"gluon_bwd": lambda: attn_bwd(do, q, k, v, out, lse, scale)}
        from magi_attention.common import AttnSlice
        from magi_attention.functional import FlexAttnPlan
        from magi_attention.kernels import triton as tk
        plan = FlexAttnPlan.from_slices([AttnSlice.make(0, seqlen, 0, seqlen, 0)], seqlen, seqlen)
        fns["ffa_triton_bwd"] = lambda: tk.bwd(do, q, k, v, out, lse, plan, scale)
        try:
            from flash_attn.cute.interface import _flash_attn_bwd
            fns["fa4_bwd"] = lambda: _flash_attn_bwd(q[None], k[None], v[None], out[None], do[None],
                                                     lse.t()[None].contiguous(), softmax_scale=scale)
        except Exception as e:  # noqa: BLE001
            row(kernel="fa4_bwd", seqlen=seqlen, status="unavailable", message=str(e)[:200])
        for name, fn in fns.items():
            try:
                ms = time_ms(fn, 150.0)
                row(kernel=name, seqlen=seqlen, status="ok", runtime_ms=ms,
                    tflops_per_s=flops / (ms * 1e-3) / 1e12)
            except Exception as e:  # noqa: BLE001
                row(kernel=name, seqlen=seqlen, status="error", message=f"{type(e).__name__}: {str(e)[:400]}")
    f.close()


if __name__ == "__main__":
    main()
