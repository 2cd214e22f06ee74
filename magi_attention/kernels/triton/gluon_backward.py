"""FFA's backward on Hopper written in Gluon: one pass over the block-sparse plan,
FlashAttention-3's structure.

One program per (key tile of 128, kv head), or per (key tile, chunk of a kv head's q heads) with
head_chunks > 1 (each chunk then adds its dK/dV share to one fp32 buffer by atomics), in three
partitions:
- a producer warp loads the tile's K and V once (two 64-key halves), then Q_i and dO_i (64 q rows)
  with the rows' lse2 and delta, of every q tile the plan lists for this key tile, for every q
  head of the group (or of its chunk), into a NUM_BUF-slot ring;
- two consumer warpgroups own 64 keys each and keep their dK, dV in registers (fp32). Per step:
  S^T = K_c Q_i^T, dP^T = V_c dO_i^T, P^T = exp2(S^T scale - lse_i) (on partial tiles masked
  from the pair's bitmap, loaded by the producer with Q_i, where bits_suit: rows of several key
  intervals; else from the plan's row table: read from global memory, or, where row_tma_suits,
  the rows' one interval loaded with Q_i), dV_c += P^T dO_i, dS^T = P^T (dP^T - delta_i),
  dK_c += dS^T Q_i;
- dQ_i = dS_i K (over all 128 keys) is split by columns: the consumers swap their dS^T halves
  through shared memory (two mbarriers per buffer), each computes 64 of dQ_i's columns and adds
  them to an fp32 dQ buffer by one TMA reduce-add (element atomics ran 0.72x).
  At head_dim 64 a consumer's half cannot be cut at 32 columns of a 128-byte swizzle, so each
  consumer adds its own 64 keys' share of all columns instead (twice the reduce traffic).
5 MMAs per step where the ordered two-kernel Triton path needs 7. Split into head chunks
(head_chunks_for), the programs that run together drift over fewer q heads and their dq rows
stay in L2 (causal_document 64k: 0.88x the time on an H100).

lse2 = lse * log2(e) and delta = rowsum(O * dO) come from the Triton backward's preprocess kernel
(padded per head to whole q tiles); the fp32 dQ is rounded to q's dtype at the end.

Measured on H200 (GQA 64:8, d128, bf16): 0.85-0.87x FA4 on full and causal at 16k and 64k,
1.05-1.32x the ordered Triton backward from 8k tokens on (docs/design/ffa_kernels.md). The
backward of kernels.triton.bwd on sm90 where plan_suits and deterministic=False.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import triton
from triton._C.libtriton import ir
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import builtin
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                              warpgroup_mma, warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ..block_sparse import BlockSparsePlan, int32_words, partial_pairs, partial_tile_bitmaps
from .launch import cached_launch
from .gluon_forward import (CONSUMER_REGS, MAXNREG, PRODUCER_REGS, _descriptor, hopper_reason,
                            shared_layout, tma_rows)

BLOCK_M = 64  # q rows per step
BLOCK_N = 128  # keys per program: two consumer warpgroups of HALF_N
HALF_N = 64
WORDS = BLOCK_N // 32  # bitmap words of a q row of a partial pair (KeyTileBits)
NUM_BUF = 2  # Q/dO ring slots
HEAD_DIMS = (64, 128)
# Below this many listed q tiles per key tile (at BLOCK_M x BLOCK_N) the ordered Triton backward
# is as fast or faster: short lists and few programs (one per key tile and kv head). H200, GQA
# 64:8, d128, Gluon / Triton time: 0.64-1.15 at 3.2-16.0 q tiles a key tile, 0.98-1.32 from 16.9
# (docs/design/ffa_kernels.md).
MIN_Q_TILES_PER_KEY_TILE = 16.5
# From this share of partial tiles among the listed ones, partial tiles read their rows' one
# kept-key interval from shared memory (TMA with Q) rather than wait on the table in global
# memory: that path spills 80 bytes, not 60, on every step; causal_document 16k (28% partial)
# 1.03-1.05x, masks at 18-22% 0.97-1.03x (docs/design/ffa_kernels.md).
MIN_PARTIAL_FOR_ROW_TMA = 0.25
# A kv head's q heads are split over programs (head_chunks: one q head each where the lists are
# long enough) down to this many steps a program: the programs that run together then share one
# q head's dq rows, which L2 holds, instead of drifting over the group's. One H100, GQA 64:8,
# d128, time against one program per kv head: causal_document 64k 0.88 (L2 hit rate 56% -> 88%),
# causal 64k 0.93, causal_document 16k 0.89 with 2 or 4 chunks (docs/design/ffa_kernels.md).
MIN_STEPS_PER_PROGRAM = 32
# Where every key tile lists about as many q tiles (list lengths' std / mean below
# MIN_LIST_CV) the programs switch q heads together and do not drift, so short lists keep one
# program per kv head: sliding_window_causal (cv 0.07-0.14, 17-18 q tiles) ran 1.03-1.17x the
# time with 4 chunks. Long lists gain even so (full, cv 0: 0.96-0.98 with 8 chunks at 16k-64k).
MIN_LIST_CV = 0.25
LONG_LIST = 128
# Bitmaps of partial pairs (KeyTileBits) at most this large a plan; a plan with more partial
# pairs keeps the row table if it has one, else the ordered Triton backward
# (block_sparse at 64k: 197k partial pairs, 193 MB a plan)
BITS_BYTES_PER_PAIR = BLOCK_M * BLOCK_N // 8
MAX_BITS_BYTES = 64 << 20
# ... and where at most this share of the listed pairs is partial. One H100, GQA 64:8, d128,
# bitmaps against the row table or the ordered Triton backward: 1.09-2.14x where 3-31% of the
# pairs are partial, 0.78-0.85x at 86-92% (block and hash sparsity), which keep the ordered
# backward (docs/design/ffa_kernels.md).
MAX_PARTIAL_FOR_BITS = 0.5
# The ring slot of Q_i / dO_i released once dK's MMA (its last reader) is done, before the dQ add
# (its drain wait and two warpgroup barriers), not after it: on where the key tiles list at least
# this many q tiles on average (early_empty_suits): +1.6% on full 16k (256 q tiles a key tile),
# +0.8% on causal (129), 0 to -8% on the document masks at 16k (17-31) (docs/design/ffa_kernels.md).
EARLY_EMPTY_MIN_Q_TILES = 64.0
ITEM_PAIRS = 2.0  # a key tile's fixed cost in pairs in pick_plan, as the forward's (not measured)


@builtin
def _tma_reduce_add(tensor_desc, coord, src, _semantic=None):
    """Bulk tensor reduce-add of a shared-memory tile into global memory (TMA, fp32 adds in L2).
    Gluon 3.6 builds the op but does not export it in its hopper.tma module."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle,
                                              coord, src.handle)


def plan_suits(plan: BlockSparsePlan) -> bool:
    """Whether this plan's key tiles list enough q tiles for the Gluon backward to beat the
    ordered Triton one, and its partial tiles can be masked (a row table, or bitmaps:
    bits_suit) (tensor sizes only: no device sync)."""
    return (_maskable(plan)
            and plan.k_tile_qt.numel() >= MIN_Q_TILES_PER_KEY_TILE * max(plan.num_k_tiles, 1))


def _maskable(plan: BlockSparsePlan) -> bool:
    """Whether the Gluon backward can mask this plan's partial tiles (a row table, or bitmaps)."""
    return plan.row_lo.shape[1] > 0 or bits_suit(plan)


def pick_plan(grid: BlockSparsePlan, cut: BlockSparsePlan | None) -> BlockSparsePlan:
    """The grid's plan or the one cut at the slices (None: not built): where the Gluon backward
    runs the grid's (plan_suits), the cut one if it costs less (visited pairs plus ITEM_PAIRS a
    key tile), however short its lists (cut at 16k, causal_document's averaged 14.7 q tiles a key
    tile and ran 1.06x its grid plan; the document masks 1.01-1.06x at 16k,
    docs/design/ffa_kernels.md); else the cut one where it suits itself. So a cut plan it
    returns is one the Gluon backward should run. Tensor sizes only."""
    def cost(plan):
        return plan.k_tile_qt.numel() + ITEM_PAIRS * plan.num_k_tiles
    if cut is None or not _maskable(cut):
        return grid
    if plan_suits(grid):
        return cut if cost(cut) < cost(grid) else grid
    return cut if plan_suits(cut) else grid


def early_empty_suits(plan: BlockSparsePlan) -> bool:
    """Whether this plan's key tiles list enough q tiles for the early release of a step's
    Q / dO slot to pay (tensor sizes only: no device sync)."""
    return plan.k_tile_qt.numel() >= EARLY_EMPTY_MIN_Q_TILES * max(plan.num_k_tiles, 1)


def bits_suit(plan: BlockSparsePlan) -> bool:
    """Whether partial tiles should mask from KeyTileBits: rows of several key intervals (the
    table's loop runs over them every partial step) or more than the table holds, at most
    MAX_PARTIAL_FOR_BITS of the pairs partial, and the bitmaps within MAX_BITS_BYTES
    (host-side counts only)."""
    pairs = plan.num_tile_pairs
    partial = pairs - plan.num_full_pairs
    return (plan.row_lo.shape[1] != 1 and not plan.cut_at_slices
            and 0 < partial <= MAX_PARTIAL_FOR_BITS * pairs
            and partial * BITS_BYTES_PER_PAIR <= MAX_BITS_BYTES)


def head_chunks_for(plan: BlockSparsePlan, group: int) -> int:
    """How many programs a key tile split a kv head's ``group`` q heads: 1 where the lists are
    short and of one length (MIN_LIST_CV, LONG_LIST), else the most (a divisor of group) that
    leaves each program MIN_STEPS_PER_PROGRAM steps of the mean list (host-side counts only).
    Any split costs one fp32 dK and dV (2 x Sk x Hkv x D x 4 bytes) and their atomic adds."""
    tiles = max(plan.num_k_tiles, 1)
    mean_list = plan.k_tile_qt.numel() / tiles
    if plan.k_list_cv < MIN_LIST_CV and mean_list < LONG_LIST:
        return 1
    chunks = 1
    for n in range(1, group + 1):
        if group % n == 0 and mean_list * group / n >= MIN_STEPS_PER_PROGRAM:
            chunks = n
    return chunks


def row_tma_suits(plan: BlockSparsePlan) -> bool:
    """Whether partial tiles should read their row intervals by TMA (one interval per row, and
    enough partial tiles; host-side counts only). Grid plans only: on a cut plan it passes its
    GPU tests (it reads the table by slot), but its speed there is not measured."""
    pairs = plan.num_tile_pairs
    return (plan.row_lo.shape[1] == 1 and pairs > 0 and not plan.cut_at_slices
            and pairs - plan.num_full_pairs >= MIN_PARTIAL_FOR_ROW_TMA * pairs)


@dataclass(frozen=True)
class KeyTileBits:
    """Bitmaps of a plan's partial pairs for the backward's partial steps, in the order the key
    tiles list them: pair p (the list position minus ``base[key tile]``) holds WORDS rows of
    BLOCK_M int32 words, ``words[(p * WORDS + w) * BLOCK_M + r]`` with bit ``k % 32`` set when
    key ``w * 32 + k % 32`` of the key tile is kept for q row ``r`` of the q tile. A partial step
    then masks with one word a cell, whatever the number of key intervals of its rows (the row
    table costs a loop over them: qk_sparse's 5 a row), and plans with more intervals
    than the table holds can run here too. 1 KiB a partial pair."""

    words: torch.Tensor
    base: torch.Tensor

    @property
    def nbytes(self) -> int:
        return self.words.numel() * 4


def key_tile_bits(plan: BlockSparsePlan, intervals) -> KeyTileBits:
    """KeyTileBits of a BLOCK_M x BLOCK_N plan from the union's merged key intervals (row, lo,
    hi) (block_sparse.union_row_intervals / mask_intervals), on the plan's device. Host work:
    call it when the mask is planned, never per call."""
    if (plan.block_m, plan.block_n) != (BLOCK_M, BLOCK_N):
        raise ValueError(f"plan tiles {(plan.block_m, plan.block_n)} != {(BLOCK_M, BLOCK_N)}")
    part_qt, part_kt = partial_pairs(plan)  # by q tile, then key tile
    # a key tile lists its partial q tiles last, ascending: the key lists' order is by key tile
    order = np.lexsort((part_qt, part_kt))
    bits = np.zeros((max(len(order), 1), BLOCK_M, WORDS), dtype=np.int64)  # never empty (TMA)
    bits[:len(order)] = partial_tile_bitmaps(plan, intervals, part_qt, part_kt)[order]
    nfull = plan.k_tile_num_full.cpu().numpy()
    device = plan.k_tile_ptr.device
    return KeyTileBits(int32_words(bits.transpose(0, 2, 1)).to(device),
                       torch.from_numpy(np.cumsum(nfull).astype(np.int32)).to(device))


def unsupported_reason(q: torch.Tensor, k: torch.Tensor, softcap: float,
                       deterministic: bool) -> str | None:
    """Why this backward cannot run these inputs (the Triton backward then does), or None."""
    if softcap > 0:
        return "softcap runs on the Triton backward"
    if deterministic:
        return "deterministic=True runs the ordered Triton backward (dq without atomics)"
    return hopper_reason(q, k, "backward", HEAD_DIMS)


@gluon.jit
def _kv_head(chunk, HEAD_CHUNKS: gl.constexpr):
    """The kv head of a head chunk (the chunks of one kv head are consecutive)."""
    return chunk // HEAD_CHUNKS


@gluon.jit
def _opaque_zero(j):
    """0 for a step index j >= 0, which neither LLVM nor ptxas can fold (_consumer's K/V views)."""
    return gl.inline_asm_elementwise("shr.u32 $0, $1, 31;", "=r,r", [j], dtype=gl.int32,
                                     is_pure=True, pack=1)


@gluon.jit
def _step(j, n_list, n_full, start, shift, chunk, heads, k_tile_qt):
    """Step j's (q head, list position): the ``heads`` q heads of this program's chunk (the kv
    head's group, or a part of it) in the outer loop, the key tile's q tiles inside, the
    full ones rotated by key tile (shift) so that programs running together add into different
    dq tiles. The heads are not rotated: programs of one kv head then stay on one q head at a
    time and the dq rows they add to stay in L2 (rotating them too was 0.79-0.86x)."""
    g = j // n_list
    i = j - g * n_list
    head = chunk * heads + g % heads  # g < heads; with the modulo ptxas spills 60 bytes, not 124
    t = start + i
    if i < n_full:
        t = start + (i + shift) % n_full
    return head, t, gl.load(k_tile_qt + t)


@gluon.jit
def _q_row(q_starts, q_tile, BLOCK_M: gl.constexpr, CUT: gl.constexpr):
    """A q tile's first row: the plan's q_starts entry where its tiles are cut at the slices
    (CUT), else the grid's."""
    if CUT:
        q_lo = gl.load(q_starts + q_tile)
    else:
        q_lo = q_tile * BLOCK_M
    return q_lo


@gluon.jit
def _producer(args, ROW_INTERVALS: gl.constexpr, ROW_TMA: gl.constexpr, BITS: gl.constexpr,
              HEAD_CHUNKS: gl.constexpr, EARLY_EMPTY: gl.constexpr, CUT: gl.constexpr):
    (q_desc, k_desc, v_desc, do_desc, dq_desc, DK, DV, lse_desc, delta_desc, lo_desc, hi_desc,
     bits_desc, k_tile_qt, q_starts, row_lo, row_hi, bits_base, q_rows, seqlen_k, num_heads_q,
     heads, sm_scale, k_row, k_end, chunk, start, mid, end, k_smem, v_smem, q_smem, do_smem,
     lse_smem, delta_smem, lo_smem, hi_smem, bits_smem, ds_smem, dq_smem, kv_bar, ready, empty,
     ds_ready, ds_free) = args
    HALF_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = k_desc.block_type.shape[1]
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    NUM_BUF: gl.constexpr = q_smem.type.shape[0]
    WORDS: gl.constexpr = 2 * HALF_N // 32
    NBYTES: gl.constexpr = (q_desc.block_type.nbytes + do_desc.block_type.nbytes
                            + lse_desc.block_type.nbytes + delta_desc.block_type.nbytes)
    mbarrier.expect(kv_bar, 2 * k_desc.block_type.nbytes + 2 * v_desc.block_type.nbytes)
    kv_head = _kv_head(chunk, HEAD_CHUNKS)
    for c in gl.static_range(2):
        tma.async_copy_global_to_shared(k_desc, [k_row + c * HALF_N, kv_head * HEAD_DIM], kv_bar,
                                        k_smem.index(c))
        tma.async_copy_global_to_shared(v_desc, [k_row + c * HALF_N, kv_head * HEAD_DIM], kv_bar,
                                        v_smem.index(c))
    n_list = end - start
    n_full = mid - start
    k_tile = k_row // (2 * HALF_N)
    shift = k_tile % gl.maximum(n_full, 1)
    if BITS:  # the bitmap of the partial pair at list position t is t - bits_base[k_tile]
        pair0 = gl.load(bits_base + k_tile)
    for j in range(heads * n_list):
        slot = j % NUM_BUF
        head, t, q_tile = _step(j, n_list, n_full, start, shift, chunk, heads,
                                k_tile_qt)
        # CUT: the row's load issued before the wait, whose time then hides its latency (+0.5% to
        # +2.8% on the full mask's cut plans, docs/design/ffa_kernels.md)
        q_lo = _q_row(q_starts, q_tile, BLOCK_M, CUT)
        mbarrier.wait(empty.index(slot), ((j // NUM_BUF) & 1) ^ 1)  # fresh barriers pass
        if BITS:
            if t >= mid:
                mbarrier.expect(ready.index(slot), NBYTES + WORDS * bits_desc.block_type.nbytes)
                at = (t - pair0) * WORDS * BLOCK_M
                for w in gl.static_range(WORDS):
                    tma.async_copy_global_to_shared(bits_desc, [at + w * BLOCK_M],
                                                    ready.index(slot),
                                                    bits_smem.index(slot * WORDS + w))
            else:
                mbarrier.expect(ready.index(slot), NBYTES)
        elif ROW_TMA:
            if t >= mid:  # a partial tile: its rows' kept-key intervals come along (by slot:
                # CUT's tables are laid out by slot)
                mbarrier.expect(ready.index(slot), NBYTES + 2 * lo_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(lo_desc, [q_tile * BLOCK_M], ready.index(slot),
                                                lo_smem.index(slot))
                tma.async_copy_global_to_shared(hi_desc, [q_tile * BLOCK_M], ready.index(slot),
                                                hi_smem.index(slot))
            else:
                mbarrier.expect(ready.index(slot), NBYTES)
        else:
            mbarrier.expect(ready.index(slot), NBYTES)
        tma.async_copy_global_to_shared(q_desc, [q_lo, head * HEAD_DIM],
                                        ready.index(slot), q_smem.index(slot))
        tma.async_copy_global_to_shared(do_desc, [q_lo, head * HEAD_DIM],
                                        ready.index(slot), do_smem.index(slot))
        # the rows' lse2 and delta ride along: loaded by the consumers from global memory, their
        # latency was exposed twice per step (a seventh of the consumers' stalls under ncu)
        row = head * (lse_desc.shape[0] // num_heads_q) + q_tile * BLOCK_M
        tma.async_copy_global_to_shared(lse_desc, [row], ready.index(slot), lse_smem.index(slot))
        tma.async_copy_global_to_shared(delta_desc, [row], ready.index(slot),
                                        delta_smem.index(slot))


@gluon.jit
def _keep_t(keys, cols, row_lo, row_hi, q_rows, k_end, ROW_INTERVALS: gl.constexpr,
            CUT: gl.constexpr):
    """[keys, q cols]: cell kept by the q row's interval table (transposed tile). A loop over
    integer offsets: unrolled (static_range), every bound was loaded up front and the consumer
    spilled 1416 bytes at 5 intervals a row (qk_sparse), and with the pointers summed inside
    the loop 788; this form spills 64, as at one interval (sm90 compile), and ran qk_sparse's
    backward 1.09x."""
    col_ok = cols < q_rows
    k2 = gl.expand_dims(keys, 1)
    keep = (k2 < 0) & gl.expand_dims(cols < 0, 0)  # all False
    for r in range(ROW_INTERVALS):
        at = cols * ROW_INTERVALS + r
        lo = gl.load(row_lo + at, mask=col_ok, other=0)
        hi = gl.load(row_hi + at, mask=col_ok, other=0)
        if CUT:  # (CUT: keys past a key tile cut short are the next tile's)
            hi = gl.minimum(hi, k_end)
        keep = keep | ((k2 >= gl.expand_dims(lo, 0)) & (k2 < gl.expand_dims(hi, 0)))
    return keep


@gluon.jit
def _add_dq(dq, dq_desc, dq_smem_c, q_lo, col):
    """dq (fp32, already scaled) into the dQ buffer's [q_lo:, col:] block by a TMA reduce-add
    (rows past the buffer's are clipped)."""
    tma.store_wait(pendings=0)  # the last reduce-add has read this staging buffer
    gl.thread_barrier()
    dq_smem_c.store(dq)
    fence_async_shared()
    gl.thread_barrier()
    _tma_reduce_add(dq_desc, [q_lo, col], dq_smem_c)


@gluon.jit
def _consumer(args, ROW_INTERVALS: gl.constexpr, ROW_TMA: gl.constexpr, BITS: gl.constexpr,
              HEAD_CHUNKS: gl.constexpr, EARLY_EMPTY: gl.constexpr, CUT: gl.constexpr,
              c: gl.constexpr):
    """Consumer warpgroup c: keys [c * HALF_N, (c + 1) * HALF_N) of the key tile."""
    (q_desc, k_desc, v_desc, do_desc, dq_desc, DK, DV, lse_desc, delta_desc, lo_desc, hi_desc,
     bits_desc, k_tile_qt, q_starts, row_lo, row_hi, bits_base, q_rows, seqlen_k, num_heads_q,
     heads, sm_scale, k_row, k_end, chunk, start, mid, end, k_smem, v_smem, q_smem, do_smem,
     lse_smem, delta_smem, lo_smem, hi_smem, bits_smem, ds_smem, dq_smem, kv_bar, ready, empty,
     ds_ready, ds_free) = args
    HALF_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = k_desc.block_type.shape[1]
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    NUM_BUF: gl.constexpr = q_smem.type.shape[0]
    WORDS: gl.constexpr = 2 * HALF_N // 32
    # dQ split by columns after swapping dS halves at head_dim 128; at 64 each consumer adds its
    # own keys' share of all columns (no swap; the 32-column halves would cut a 128-byte swizzle)
    SPLIT: gl.constexpr = HEAD_DIM == 128
    DQ_COLS: gl.constexpr = HEAD_DIM // 2 if SPLIT else HEAD_DIM
    dtype: gl.constexpr = k_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, HEAD_DIM, 16])
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, DQ_COLS, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    col_s: gl.constexpr = gl.SliceLayout(0, s_layout)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    keys = k_row + c * HALF_N + gl.arange(0, HALF_N, layout=row_s)
    qk_scale = sm_scale * 1.4426950408889634
    s_zero = gl.zeros([HALF_N, BLOCK_M], gl.float32, s_layout)
    dq_zero = gl.zeros([BLOCK_M, DQ_COLS], gl.float32, dq_layout)
    # every MMA is waited for within its step: MMAs left in flight across the loop's back edge
    # made ptxas serialise every wgmma of the kernel (its SASS); waiting later inside the step
    # (dV after dS, dK after dQ) cost spills and 20%, the dK MMA over the dQ add gained nothing
    dk = gl.zeros([HALF_N, HEAD_DIM], gl.float32, acc_layout)
    dv = gl.zeros([HALF_N, HEAD_DIM], gl.float32, acc_layout)
    n_list = end - start
    n_full = mid - start
    k_tile = k_row // (2 * HALF_N)
    shift = k_tile % gl.maximum(n_full, 1)
    mbarrier.wait(kv_bar, 0)
    for j in range(heads * n_list):
        slot = j % NUM_BUF
        # K_c and V_c's views taken anew each step at an index ptxas cannot fold: hoisted out of
        # the loop, the S and dP MMAs' 16 wgmma descriptors stayed live across it and spilled (64
        # bytes; 18 LDL/STL in the step loops); +2.3% on full 16k (docs/design/ffa_kernels.md)
        at = c + _opaque_zero(j)
        k_c = k_smem.index(at)
        v_c = v_smem.index(at)
        head, t, q_tile = _step(j, n_list, n_full, start, shift, chunk, heads,
                                k_tile_qt)
        q_lo = q_tile * BLOCK_M  # the q tile's slot (CUT: dQ and the row table are by slot)
        q_i = q_smem.index(slot)
        do_i = do_smem.index(slot)
        cols = q_lo + gl.arange(0, BLOCK_M, layout=col_s)
        mbarrier.wait(ready.index(slot), (j // NUM_BUF) & 1)
        st = warpgroup_mma(k_c, q_i.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        dpt = warpgroup_mma(v_c, do_i.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        lse2 = lse_smem.index(slot).load(col_s)  # +inf past the tile's rows: P = 0
        st = warpgroup_mma_wait(num_outstanding=1, deps=(st, ))
        pt = gl.exp2(st * qk_scale - gl.expand_dims(lse2, 0))
        if t >= mid:  # a partial tile: cells outside the union get P = 0
            if BITS:  # this half's two words of each q row (keys 0-31, 32-63), one at a time
                # (both live at once spilled 44 more bytes)
                kl = gl.expand_dims(gl.arange(0, HALF_N, layout=row_s), 1)
                for h in gl.static_range(2):
                    word = gl.expand_dims(bits_smem.index(slot * WORDS + 2 * c + h).load(col_s), 0)
                    keep = ((word >> (kl & 31)) & 1) != 0
                    pt = gl.where(keep | ((kl >> 5) != h), pt, 0.0)
            elif ROW_TMA:  # one interval per row, in shared memory (rows past q_rows: [0, 0)),
                # one bound at a time (both live at once spilled 28 more bytes)
                k2 = gl.expand_dims(keys, 1)
                pt = gl.where(k2 >= gl.expand_dims(lo_smem.index(slot).load(col_s), 0), pt, 0.0)
                hi = hi_smem.index(slot).load(col_s)
                if CUT:  # the keys past a key tile cut short are the next tile's
                    hi = gl.minimum(hi, k_end)
                pt = gl.where(k2 < gl.expand_dims(hi, 0), pt, 0.0)
            else:
                pt = gl.where(_keep_t(keys, cols, row_lo, row_hi, q_rows, k_end, ROW_INTERVALS,
                                      CUT), pt, 0.0)
        dv = warpgroup_mma(gl.convert_layout(pt.to(dtype), op_layout), do_i, dv, is_async=True)
        delta = delta_smem.index(slot).load(col_s)
        dpt, dv = warpgroup_mma_wait(num_outstanding=0, deps=(dpt, dv))
        ds_lp = (pt * (dpt - gl.expand_dims(delta, 0))).to(dtype)
        b = j % 2
        ds_c = ds_smem.index(2 * b + c)
        if SPLIT:
            mbarrier.wait(ds_free.index(b), ((j // 2) & 1) ^ 1)  # both read it 2 steps ago
        ds_c.store(ds_lp)
        fence_async_shared()
        gl.thread_barrier()
        dk = warpgroup_mma(gl.convert_layout(ds_lp, op_layout), q_i, dk, is_async=True)
        if SPLIT:
            mbarrier.arrive(ds_ready.index(b), count=1)
            mbarrier.wait(ds_ready.index(b), (j // 2) & 1)  # the other half is there too
            dq = warpgroup_mma(ds_smem.index(2 * b).permute((1, 0)),
                               k_smem.index(0).slice(c * DQ_COLS, DQ_COLS, dim=1), dq_zero,
                               use_acc=False, is_async=True)
            dq = warpgroup_mma(ds_smem.index(2 * b + 1).permute((1, 0)),
                               k_smem.index(1).slice(c * DQ_COLS, DQ_COLS, dim=1), dq,
                               is_async=True)
        else:
            dq = warpgroup_mma(ds_c.permute((1, 0)), k_c, dq_zero, use_acc=False, is_async=True)
        dq, dk = warpgroup_mma_wait(num_outstanding=0, deps=(dq, dk))
        if SPLIT:
            mbarrier.arrive(ds_free.index(b), count=1)
        if EARLY_EMPTY:  # every read of the slot is done (dK's MMA read Q_i last)
            mbarrier.arrive(empty.index(slot), count=1)
        col = head * HEAD_DIM
        if SPLIT:
            col += c * DQ_COLS
        _add_dq(dq * sm_scale, dq_desc, dq_smem.index(c), q_lo, col)
        if not EARLY_EMPTY:
            mbarrier.arrive(empty.index(slot), count=1)
    tma.store_wait(pendings=0)
    kv_head = _kv_head(chunk, HEAD_CHUNKS)
    num_heads_kv = num_heads_q // (heads * HEAD_CHUNKS)
    # head chunks add their share into one zeroed fp32 dK/dV (a partial per chunk cost
    # chunks x the memory and a summing pass)
    _store_rows(dk * sm_scale, DK, keys, kv_head, num_heads_kv, k_end, HEAD_DIM, acc_layout,
                HEAD_CHUNKS > 1)
    _store_rows(dv, DV, keys, kv_head, num_heads_kv, k_end, HEAD_DIM, acc_layout,
                HEAD_CHUNKS > 1)


@gluon.jit
def _store_rows(x, X, keys, kv_head, num_heads_kv, k_end, HEAD_DIM: gl.constexpr,
                layout: gl.constexpr, ADD: gl.constexpr):
    """This consumer's key rows of dK or dV ([Sk, Hkv, D], rows from the key tile's end on
    dropped: seqlen_k, or a tile cut short at a slice bound), stored or (ADD, an fp32 X) added
    by atomics."""
    rows = gl.convert_layout(keys, gl.SliceLayout(1, layout))
    cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, layout))
    offs = (gl.expand_dims(rows, 1).to(gl.int64) * num_heads_kv + kv_head) * HEAD_DIM \
        + gl.expand_dims(cols, 0)
    keep = gl.expand_dims(rows < k_end, 1)
    if ADD:
        gl.atomic_add(X + offs, x, mask=keep, sem="relaxed")
    else:
        gl.store(X + offs, x.to(X.dtype.element_ty), mask=keep)


@gluon.jit
def _bwd_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, DK, DV, lse_desc, delta_desc, lo_desc,
                hi_desc, bits_desc, k_tile_ptr, k_tile_qt, k_tile_num_full, k_tile_order, q_starts,
                k_starts, row_lo, row_hi, bits_base, q_rows, seqlen_k, num_heads_q, heads,
                sm_scale, NUM_BUF: gl.constexpr, ROW_INTERVALS: gl.constexpr,
                ROW_TMA: gl.constexpr, BITS: gl.constexpr, HEAD_CHUNKS: gl.constexpr,
                EARLY_EMPTY: gl.constexpr, CUT: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                PRODUCER_REGS: gl.constexpr, num_warps: gl.constexpr):
    HALF_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = k_desc.block_type.shape[1]
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    DQ_COLS: gl.constexpr = dq_desc.block_type.shape[1]
    dtype: gl.constexpr = k_desc.dtype
    # q_rows: the rows of dQ and of the row table, seqlen_q on the grid and a cut plan's slots
    k_tile = gl.load(k_tile_order + gl.program_id(0))  # heaviest key tiles first
    # a kv head's q heads may be split into HEAD_CHUNKS programs a key tile, the grid's slowest
    # dimension: the programs that run together then drift over fewer q heads, whose dq rows
    # L2 must hold (chunks numbered kv head by kv head; ``heads``: the q heads of one chunk).
    # At 16k a chunk's walk is fewer programs than SMs and the last chunk's heaviest key tiles
    # run alone at the end (a host model: the span 3-5% past the mean on the document masks),
    # but the order that fixes that (one kv head's key tiles with its chunks fastest) measured
    # full_document 16k +4.3% and full -3.3%, causal_document 64k -10.4%: the L2 the chunk
    # order keeps is worth more (docs/design/ffa_kernels.md)
    chunk = gl.program_id(1) * HEAD_CHUNKS + gl.program_id(2)
    if CUT:  # the key tile's keys from the plan's k_starts (tiles cut at the slices)
        k_row = gl.load(k_starts + k_tile)
        k_end = gl.load(k_starts + k_tile + 1)
    else:
        k_row = k_tile * 2 * HALF_N
        k_end = seqlen_k
    start = gl.load(k_tile_ptr + k_tile)
    end = gl.load(k_tile_ptr + k_tile + 1)
    mid = start + gl.load(k_tile_num_full + k_tile)

    k_smem = gl.allocate_shared_memory(dtype, [2, HALF_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [2, HALF_N, HEAD_DIM], v_desc.layout)
    q_smem = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_M, HEAD_DIM], q_desc.layout)
    do_smem = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_M, HEAD_DIM], do_desc.layout)
    lse_smem = gl.allocate_shared_memory(gl.float32, [NUM_BUF, BLOCK_M], lse_desc.layout)
    delta_smem = gl.allocate_shared_memory(gl.float32, [NUM_BUF, BLOCK_M], delta_desc.layout)
    # ROW_TMA: the rows' one kept-key interval of a partial step (16 wide: a placeholder)
    WORDS: gl.constexpr = 2 * HALF_N // 32
    ROW_W: gl.constexpr = BLOCK_M if ROW_TMA else 16
    lo_smem = gl.allocate_shared_memory(gl.int32, [NUM_BUF, ROW_W], lo_desc.layout)
    hi_smem = gl.allocate_shared_memory(gl.int32, [NUM_BUF, ROW_W], hi_desc.layout)
    # BITS: a partial pair's bitmap, one BLOCK_M row of 32-bit words per 32 keys
    BITS_W: gl.constexpr = BLOCK_M if BITS else 16
    bits_smem = gl.allocate_shared_memory(gl.int32, [NUM_BUF * WORDS, BITS_W], bits_desc.layout)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HALF_N, BLOCK_M], dtype)
    ds_smem = gl.allocate_shared_memory(dtype, [4, HALF_N, BLOCK_M], ds_layout)  # [buffer, half]
    dq_smem = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M, DQ_COLS], dq_desc.layout)
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    ds_free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for i in gl.static_range(NUM_BUF):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # both consumers release a slot
    for i in gl.static_range(2):
        mbarrier.init(ds_ready.index(i), count=2)
        mbarrier.init(ds_free.index(i), count=2)
    fence_async_shared()
    args = (q_desc, k_desc, v_desc, do_desc, dq_desc, DK, DV, lse_desc, delta_desc, lo_desc,
            hi_desc, bits_desc, k_tile_qt, q_starts, row_lo, row_hi, bits_base, q_rows, seqlen_k,
            num_heads_q, heads, sm_scale, k_row, k_end, chunk, start, mid, end, k_smem, v_smem,
            q_smem, do_smem, lse_smem, delta_smem, lo_smem, hi_smem, bits_smem, ds_smem, dq_smem,
            kv_bar, ready, empty, ds_ready, ds_free)
    # (the partitions' constexpr arguments follow the tuple: a tuple assigned in a kernel holds
    # tensors only)
    gl.warp_specialize(
        [(_consumer, (args, ROW_INTERVALS, ROW_TMA, BITS, HEAD_CHUNKS, EARLY_EMPTY, CUT, 0)),
         (_consumer, (args, ROW_INTERVALS, ROW_TMA, BITS, HEAD_CHUNKS, EARLY_EMPTY, CUT, 1)),
         (_producer, (args, ROW_INTERVALS, ROW_TMA, BITS, HEAD_CHUNKS, EARLY_EMPTY, CUT))],
        [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


_launch_bwd_kernel = cached_launch(_bwd_kernel)


def _dq_descriptor(dq: torch.Tensor, cols: int) -> TensorDescriptor:
    """The fp32 dQ buffer [Sq, Hq, D] as 2-D [Sq, Hq * D] with [BLOCK_M, cols] blocks."""
    view = dq.view(dq.shape[0], -1)
    return TensorDescriptor(view, list(view.shape), list(view.stride()), [BLOCK_M, cols],
                            shared_layout(BLOCK_M, cols, torch.float32))


def _row_descriptor(stat: torch.Tensor) -> TensorDescriptor:
    """A per-row 32-bit value, flat, with BLOCK_M blocks: the [Hq, padded] fp32 lse2 and delta
    (padded is a multiple of BLOCK_M, so a block never crosses heads) or a [Sq, 1] int32 row
    interval bound (blocks past Sq are zero-filled: the empty interval [0, 0)), or the words of
    KeyTileBits (a block: one word row of a partial pair)."""
    flat = stat.view(-1)
    return TensorDescriptor(flat, list(flat.shape), list(flat.stride()), [BLOCK_M], _ROW_LAYOUT)


_ROW_LAYOUT = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)


def launch_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               out: torch.Tensor, lse: torch.Tensor, plan: BlockSparsePlan, softmax_scale: float,
               row_tma: bool | None = None, head_chunks: int | None = None,
               bits: KeyTileBits | None = None, early_empty: bool | None = None):
    """dout, q, out [Sq, Hq, D]; k, v [Sk, Hkv, D]; lse [Sq, Hq] fp32 (natural log, the
    forward's) over a BLOCK_M x BLOCK_N plan -> (dq, dk, dv). Partial tiles mask from ``bits``
    (key_tile_bits of this plan) when given, else from the plan's row interval table.
    ``head_chunks`` splits each kv head's q heads over that many programs a key tile, the grid's
    slowest dimension (it must divide Hq / Hkv; None: head_chunks_for); they add their dK/dV
    shares into one fp32 buffer each. ``row_tma`` (None: row_tma_suits): partial tiles read
    their rows' one interval from shared memory. ``early_empty`` (None: early_empty_suits)
    releases a step's Q / dO slot before its dQ add."""
    from .backward import PREPROCESS_BLOCK, gather_cast, launch_preprocess

    seqlen_q, num_heads_q, head_dim = q.shape
    seqlen_k, num_heads_kv, _ = k.shape
    group = num_heads_q // num_heads_kv
    if head_chunks is None:
        head_chunks = head_chunks_for(plan, group)
    if head_chunks < 1 or group % head_chunks:
        raise ValueError(f"head_chunks={head_chunks} must divide the {group} q heads a kv head")
    if (plan.block_m, plan.block_n) != (BLOCK_M, BLOCK_N):
        raise ValueError(f"plan tiles {(plan.block_m, plan.block_n)} != {(BLOCK_M, BLOCK_N)}")
    if plan.row_lo.shape[1] == 0 and bits is None:
        raise ValueError("the Gluon backward masks partial tiles from the row interval table or "
                         "from bitmaps; this plan has no table (too many intervals per row) and "
                         "no bitmaps were given (key_tile_bits)")
    if bits is not None and plan.cut_at_slices:
        raise ValueError("bitmaps are of grid tiles; a plan cut at the slices masks from its "
                         "row interval table")
    if bits is not None and bits.base.numel() != plan.num_k_tiles:
        raise ValueError(f"bits are of a plan of {bits.base.numel()} key tiles, this plan has "
                         f"{plan.num_k_tiles}")
    # out and dout are read by pointer too (the preprocess kernel, its strides specialised)
    dout, q, out = (t.contiguous() for t in (dout, q, out))
    k, v = tma_rows(k), tma_rows(v)  # read by TMA alone: strided views in place
    lse = lse.float().contiguous()
    # [Hq, Sq rounded up to BLOCK_M]: every step's TMA box lies inside its head's row. Tiles cut
    # at the slices: [Hq, q tiles x BLOCK_M], each tile's rows in its own box (q_slot_rows), the
    # slots past a short tile's end empty (lse2 +inf: P = 0 for the next tile's rows it loads)
    padded = (plan.q_slot_rows.numel() if plan.cut_at_slices
              else triton.cdiv(seqlen_q, BLOCK_M) * BLOCK_M)
    delta = torch.empty(num_heads_q, padded, dtype=torch.float32, device=q.device)
    lse2 = torch.empty_like(delta)
    # every integer argument of the kernels follows from the shapes (cached_launch)
    key = (q.shape, k.shape, q.dtype) if q.is_cuda else None
    launch_preprocess((triton.cdiv(padded, PREPROCESS_BLOCK), num_heads_q),
                      key and ("gluon", key, padded), out, dout, lse, delta, lse2,
                      plan.q_slot_rows if plan.cut_at_slices else delta, out.stride(0),
                      out.stride(1), dout.stride(0), dout.stride(1), lse.stride(0), seqlen_q,
                      padded, HEAD_DIM=head_dim, BLOCK=PREPROCESS_BLOCK,
                      MAPPED=plan.cut_at_slices)
    # dQ rows by slot on a cut plan (the consumers add q tile t's at t * BLOCK_M), by row else;
    # the kernel's q_rows bounds them
    dq_rows = padded if plan.cut_at_slices else seqlen_q
    dq = torch.zeros(dq_rows, num_heads_q, head_dim, dtype=torch.float32, device=q.device)
    row_lo, row_hi = ((plan.slot_row_lo, plan.slot_row_hi) if plan.cut_at_slices
                      else (plan.row_lo, plan.row_hi))
    if head_chunks == 1:
        dk, dv = (torch.empty(k.shape, dtype=k.dtype, device=k.device) for _ in range(2))
    else:
        dk, dv = (torch.zeros(k.shape, dtype=torch.float32, device=k.device) for _ in range(2))
    dq_cols = head_dim // 2 if head_dim == 128 else head_dim
    # row_tma: partial tiles read their row's interval from shared memory, loaded by TMA with Q;
    # else from the table in global memory, whose latency the consumers wait out
    if row_tma is None:
        row_tma = bits is None and row_tma_suits(plan)
    if row_tma and bits is not None:
        raise ValueError("row_tma and bits are two ways to mask partial tiles: give one")
    if row_tma and plan.row_lo.shape[1] != 1:
        raise ValueError(f"row_tma needs one interval per row, the plan has {plan.row_lo.shape[1]}")
    lse2_desc, delta_desc = _row_descriptor(lse2), _row_descriptor(delta)
    lo_desc, hi_desc = ((_row_descriptor(row_lo), _row_descriptor(row_hi)) if row_tma
                        else (lse2_desc, delta_desc))  # placeholders, never read
    bits_desc, bits_base = ((_row_descriptor(bits.words), bits.base) if bits is not None
                            else (lse2_desc, plan.k_tile_num_full))  # placeholders too
    _launch_bwd_kernel((plan.num_k_tiles, num_heads_kv, head_chunks),
        key and (key, dq_cols, dq_rows),
        _descriptor(q, BLOCK_M), _descriptor(k, HALF_N), _descriptor(v, HALF_N),
        _descriptor(dout, BLOCK_M), _dq_descriptor(dq, dq_cols), dk, dv, lse2_desc, delta_desc,
        lo_desc, hi_desc, bits_desc,
        plan.k_tile_ptr, plan.k_tile_qt, plan.k_tile_num_full, plan.k_tile_order, plan.q_starts,
        plan.k_starts, row_lo, row_hi, bits_base, dq_rows, seqlen_k, num_heads_q,
        group // head_chunks,
        float(softmax_scale), NUM_BUF=NUM_BUF, ROW_INTERVALS=plan.row_lo.shape[1],
        ROW_TMA=row_tma, BITS=bits is not None, HEAD_CHUNKS=head_chunks,
        EARLY_EMPTY=early_empty_suits(plan) if early_empty is None else bool(early_empty),
        CUT=plan.cut_at_slices, CONSUMER_REGS=CONSUMER_REGS, PRODUCER_REGS=PRODUCER_REGS,
        num_warps=4, maxnreg=MAXNREG)
    if head_chunks > 1:
        dk, dv = dk.to(k.dtype), dv.to(v.dtype)
    if plan.cut_at_slices:  # slots back to rows in the cast's pass
        return gather_cast(dq, plan.row_slots, q.dtype), dk, dv
    return dq.to(q.dtype), dk, dv
