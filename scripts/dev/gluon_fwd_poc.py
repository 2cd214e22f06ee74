"""Proof of concept: a Gluon (Triton's low-level dialect) attention forward for Hopper with
FlashAttention-3's intra-warpgroup overlap, to learn whether this route can take the FFA forward
past what plain Triton 3.6 reaches (notes/ffa_triton.md, session 21: Triton waits on every wgmma
at once, so no softmax overlaps this program's own MMAs).

Full mask only (no plan, no partial tiles): a q tile of BLOCK_M rows (two warpgroups of 64 rows)
walks every key tile. Per iteration j, in issue order:
    S_{j+1} = Q K_{j+1}^T (async) | softmax(S_j) | wait PV_{j-1} | rescale O | O += P_j V_j (async)
    | wait S_{j+1}
so the exp2 of tile j runs while the tensor cores compute S_{j+1} and PV_{j-1}. K and V tiles
come by TMA into NUM_BUF-deep rings, each refilled as soon as the MMA that read it is done.

    python scripts/dev/gluon_fwd_poc.py --out $OUT          # on the GPU: check, then time
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
                                                              warpgroup_mma, warpgroup_mma_init,
                                                              warpgroup_mma_wait)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ffa_triton_sweep import time_ms  # noqa: E402
from magi_attention.kernels.triton.gluon_forward import _descriptor  # noqa: E402

LOG2E = 1.4426950408889634


@gluon.jit
def _load_kv(desc, smem, bars, tile, col, n_tiles, NUM_BUF: gl.constexpr, BLOCK_N: gl.constexpr):
    """TMA of key tile ``tile`` (if it exists) into ring slot tile % NUM_BUF."""
    slot = tile % NUM_BUF
    ok = tile < n_tiles
    mbarrier.expect(bars.index(slot), desc.block_type.nbytes, pred=ok)
    tma.async_copy_global_to_shared(desc, [tile * BLOCK_N, col], bars.index(slot), smem.index(slot),
                                    pred=ok)


@gluon.jit
def _softmax(s, m_i, l_i, qk_scale, row_o: gl.constexpr):
    """Online softmax of one score tile: P (fp32), the new row max and sum, and O's rescale
    factor in O's row layout."""
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_i, gl.convert_layout(alpha, row_o)


@gluon.jit
def _attn_fwd_kernel(q_desc, k_desc, v_desc, o_desc, Lse, seqlen_q, seqlen_k, num_heads_q,
                     qk_scale, GROUP: gl.constexpr, HEAD_DIM: gl.constexpr,
                     BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr,
                     num_warps: gl.constexpr):
    dtype: gl.constexpr = q_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    pid_m = gl.program_id(0)
    head = gl.program_id(1)
    q_row = pid_m * BLOCK_M
    q_col = head * HEAD_DIM
    kv_col = (head // GROUP) * HEAD_DIM
    n_tiles = gl.cdiv(seqlen_k, BLOCK_N)

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(NUM_BUF):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)
    fence_async_shared()

    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [q_row, q_col], q_bar, q_smem)
    for i in gl.static_range(NUM_BUF):
        _load_kv(k_desc, k_smem, k_bars, i, kv_col, n_tiles, NUM_BUF, BLOCK_N)
        _load_kv(v_desc, v_smem, v_bars, i, kv_col, n_tiles, NUM_BUF, BLOCK_N)

    # O's MMA runs across iterations: carried as an accumulator token, with the P registers it
    # reads (kept alive until the wait that retires it)
    acc = warpgroup_mma_init(gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout))
    p = gl.zeros([BLOCK_M, BLOCK_N], dtype, p_layout)
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, row_s)
    l_i = gl.zeros([BLOCK_M], gl.float32, row_s)

    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_bars.index(0), 0)
    s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)),
                      gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout), use_acc=False,
                      is_async=True)
    s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))
    # K slot 0 is free again (S_0 done): refill it with tile NUM_BUF
    _load_kv(k_desc, k_smem, k_bars, NUM_BUF, kv_col, n_tiles, NUM_BUF, BLOCK_N)

    for j in range(0, n_tiles - 1):
        nxt = j + 1
        slot_n = nxt % NUM_BUF
        mbarrier.wait(k_bars.index(slot_n), (nxt // NUM_BUF) & 1)
        s_next = warpgroup_mma(q_smem, k_smem.index(slot_n).permute((1, 0)),
                               gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout), use_acc=False,
                               is_async=True)
        p_new, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, row_o)
        p_new = gl.convert_layout(p_new.to(dtype), p_layout)
        # PV_{j-1} done (S_{j+1} may still run): O may be rescaled, V slot of j-1 is free
        acc, p = warpgroup_mma_wait(num_outstanding=1, deps=(acc, p))
        if j > 0:
            _load_kv(v_desc, v_smem, v_bars, j - 1 + NUM_BUF, kv_col, n_tiles, NUM_BUF, BLOCK_N)
        acc = acc * gl.expand_dims(alpha, 1)
        slot = j % NUM_BUF
        mbarrier.wait(v_bars.index(slot), (j // NUM_BUF) & 1)
        acc = warpgroup_mma(p_new, v_smem.index(slot), acc, is_async=True)
        p = p_new
        # S_{j+1} done (PV_j may still run): its K slot takes tile j + 1 + NUM_BUF
        s = warpgroup_mma_wait(num_outstanding=1, deps=(s_next, ))
        _load_kv(k_desc, k_smem, k_bars, nxt + NUM_BUF, kv_col, n_tiles, NUM_BUF, BLOCK_N)

    last = n_tiles - 1
    p_new, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, row_o)
    p_new = gl.convert_layout(p_new.to(dtype), p_layout)
    acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))
    acc = acc * gl.expand_dims(alpha, 1)
    mbarrier.wait(v_bars.index(last % NUM_BUF), (last // NUM_BUF) & 1)
    acc = warpgroup_mma(p_new, v_smem.index(last % NUM_BUF), acc, is_async=True)
    acc, p_new = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p_new))

    l_o = gl.convert_layout(l_i, row_o)
    out = acc / gl.expand_dims(l_o, 1)
    q_smem.store(out.to(dtype))  # Q is no longer read: its tile stages O for the TMA store
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [q_row, q_col], q_smem)
    rows = q_row + gl.arange(0, BLOCK_M, layout=row_o)
    lse = (gl.convert_layout(m_i, row_o) + gl.log2(l_o)) * 0.6931471805599453
    gl.store(Lse + rows.to(gl.int64) * num_heads_q + head, lse, mask=rows < seqlen_q)
    tma.store_wait(pendings=0)
    mbarrier.invalidate(q_bar)
    for i in gl.static_range(NUM_BUF):
        mbarrier.invalidate(k_bars.index(i))
        mbarrier.invalidate(v_bars.index(i))


def attn_fwd_ws(q, k, v, softmax_scale, block_n=128, num_buf=2):
    """The warp-specialised structure (FlashAttention-3's: producer warp, two ping-pong consumer
    warpgroups): first written here, now kernels/triton/gluon_forward.py, run on the full mask's
    plan at 128 x block_n with a num_buf-slot ring. (Rows of runs c-e were measured with this
    file's own copy of that kernel, commits 6d26a36..d195334, which the module took over.)"""
    from magi_attention.common import AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_forward
    plan = plan_block_sparse([AttnSlice.make(0, q.shape[0], 0, k.shape[0], 0)], q.shape[0],
                             k.shape[0], gluon_forward.BLOCK_M, block_n, device=q.device)
    return gluon_forward.launch_fwd(q, k, v, plan, softmax_scale, num_buf)[:2]


def attn_fwd(q, k, v, softmax_scale, block_m=128, block_n=128, num_buf=2, num_warps=8,
             maxnreg=None):
    """q [Sq, Hq, D], k/v [Sk, Hkv, D] bf16 contiguous, full mask -> (out, lse [Sq, Hq])."""
    sq, hq, d = q.shape
    sk, hk, _ = k.shape
    out = torch.empty_like(q)
    lse = torch.empty(sq, hq, dtype=torch.float32, device=q.device)

    grid = (triton.cdiv(sq, block_m), hq)
    _attn_fwd_kernel[grid](_descriptor(q, block_m), _descriptor(k, block_n), _descriptor(v, block_n),
                           _descriptor(out, block_m), lse, sq, sk, hq, softmax_scale * LOG2E,
                           GROUP=hq // hk, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
                           NUM_BUF=num_buf, num_warps=num_warps,
                           **({"maxnreg": maxnreg} if maxnreg else {}))
    return out, lse


def _reference(q, k, v, scale):
    group = q.shape[1] // k.shape[1]
    qf, kf, vf = (t.float().transpose(0, 1) for t in (q, k, v))
    kf, vf = kf.repeat_interleave(group, 0), vf.repeat_interleave(group, 0)
    s = qf @ kf.transpose(1, 2) * scale
    lse = torch.logsumexp(s, -1)
    return (torch.softmax(s, -1) @ vf).transpose(0, 1), lse.transpose(0, 1)


WS_VARIANTS = {"ws_128x128_b2": dict(block_n=128, num_buf=2),
               "ws_128x128_b3": dict(block_n=128, num_buf=3),
               "ws_128x64_b3": dict(block_n=64, num_buf=3),
               "ws_128x64_b4": dict(block_n=64, num_buf=4)}
VARIANTS = {"g_128x128_b2_w8": dict(block_m=128, block_n=128, num_buf=2, num_warps=8),
            "g_128x128_b3_w8": dict(block_m=128, block_n=128, num_buf=3, num_warps=8),
            "g_64x64_b3_w4": dict(block_m=64, block_n=64, num_buf=3, num_warps=4),
            "g_64x128_b2_w4": dict(block_m=64, block_n=128, num_buf=2, num_warps=4),
            "g_64x64_b4_w4": dict(block_m=64, block_n=64, num_buf=4, num_warps=4),
            "g_128x64_b3_w8": dict(block_m=128, block_n=64, num_buf=3, num_warps=8),
            # capped so that two programs share an SM: their softmax phases drift apart
            "g_128x64_b2_w8_r128": dict(block_m=128, block_n=64, num_buf=2, num_warps=8, maxnreg=128),
            "g_128x64_b3_w8_r128": dict(block_m=128, block_n=64, num_buf=3, num_warps=8, maxnreg=128),
            "g_128x64_b2_w8": dict(block_m=128, block_n=64, num_buf=2, num_warps=8)}


def _run(name, q, k, v, scale):
    if name in WS_VARIANTS:
        return attn_fwd_ws(q, k, v, scale, **WS_VARIANTS[name])
    return attn_fwd(q, k, v, scale, **VARIANTS[name])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--seqlens", type=int, nargs="+", default=[16384, 65536])
    p.add_argument("--variants", nargs="*", default=[*WS_VARIANTS, "g_128x128_b2_w8"])
    p.add_argument("--peers", nargs="*", default=["triton", "fa4"])
    args = p.parse_args()
    hq, hk, d = 64, 8, 128
    scale = d ** -0.5
    rows = []
    path = os.path.join(args.out, "gluon_poc.csv")
    fields = ["kernel", "variant", "seqlen", "mask", "direction", "runtime_ms", "tflops_per_s",
              "status", "message", "gpu_name", "triton_version"]
    writer_file = open(path, "w", newline="")
    writer = csv.DictWriter(writer_file, fields)
    writer.writeheader()

    def row(**kw):
        r = {"mask": "full", "direction": "fwd", "gpu_name": torch.cuda.get_device_name(),
             "triton_version": triton.__version__, **kw}
        writer.writerow(r)
        writer_file.flush()
        rows.append(r)
        print({k: r[k] for k in ("kernel", "variant", "seqlen", "status", "tflops_per_s", "message")
               if k in r}, flush=True)

    # correctness at a small size, odd length (partial last key tile, clipped q tile)
    g = torch.Generator(device="cuda").manual_seed(0)
    for sq in (1000, 2048):
        q = torch.randn(sq, 8, d, device="cuda", generator=g).bfloat16()
        k = torch.randn(sq, 2, d, device="cuda", generator=g).bfloat16()
        v = torch.randn(sq, 2, d, device="cuda", generator=g).bfloat16()
        ro, rl = _reference(q, k, v, scale)
        for name in args.variants:
            try:
                o, lse = _run(name, q, k, v, scale)
                err = ((o.float() - ro).norm() / ro.norm()).item()
                lerr = (lse - rl).abs().max().item()
                ok = err < 1e-2 and lerr < 1e-2
                row(kernel="gluon", variant=name, seqlen=sq, status="check_ok" if ok else "check_fail",
                    message=f"rel {err:.2e} lse {lerr:.2e}")
            except Exception as e:  # noqa: BLE001
                row(kernel="gluon", variant=name, seqlen=sq, status="error",
                    message=f"{type(e).__name__}: {str(e)[:400]}")
    for seqlen in args.seqlens:
        flops = 4 * seqlen * seqlen * hq * d
        q = torch.randn(seqlen, hq, d, device="cuda").bfloat16()
        k = torch.randn(seqlen, hk, d, device="cuda").bfloat16()
        v = torch.randn(seqlen, hk, d, device="cuda").bfloat16()
        fns = {}
        for name in args.variants:
            fns[("gluon", name)] = lambda name=name: _run(name, q, k, v, scale)
        if "triton" in args.peers:
            from magi_attention.kernels.block_sparse import plan_block_sparse
            from magi_attention.common import AttnSlice
            from magi_attention.kernels.triton.configs import fwd_config
            from magi_attention.kernels.triton.forward import launch_fwd
            cfg = fwd_config(d)
            plan = plan_block_sparse([AttnSlice.make(0, seqlen, 0, seqlen, 0)], seqlen, seqlen,
                                     cfg.block_m, cfg.block_n, device="cuda")
            fns[("ffa_triton", "default")] = lambda: launch_fwd(q, k, v, plan, cfg, scale, 0.0, False)
        if "fa4" in args.peers:
            try:
                from flash_attn.cute.interface import _flash_attn_fwd
                q4, k4, v4 = q[None], k[None], v[None]
                fns[("fa4", "dense")] = lambda: _flash_attn_fwd(q4, k4, v4, softmax_scale=scale,
                                                                causal=False)
            except Exception as e:  # noqa: BLE001
                row(kernel="fa4", variant="dense", seqlen=seqlen, status="unavailable", message=str(e)[:200])
        for (kernel, variant), fn in fns.items():
            try:
                ms = time_ms(fn, 150.0)
                row(kernel=kernel, variant=variant, seqlen=seqlen, runtime_ms=ms,
                    tflops_per_s=flops / (ms * 1e-3) / 1e12, status="ok")
            except Exception as e:  # noqa: BLE001
                row(kernel=kernel, variant=variant, seqlen=seqlen, status="error",
                    message=f"{type(e).__name__}: {str(e)[:400]}")
        del q, k, v, fns
        torch.cuda.empty_cache()
    writer_file.close()


if __name__ == "__main__":
    main()
