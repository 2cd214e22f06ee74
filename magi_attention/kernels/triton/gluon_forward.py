"""FFA's forward on Hopper written in Gluon (Triton's explicit dialect), FlashAttention-3's
structure over the block-sparse plan.

One program per SM (persistent: it walks the (q tile of 128 rows, q head) items, an item's first
K/V tiles loaded during the last one's epilogue), in three partitions:
- a producer warp issues every TMA load: K and V of each key tile the plan lists for the item's
  q tile (full tiles, then partial ones) into a NUM_BUF-slot ring, and the two 64-row halves of
  Q once the consumers have stored the last item's O from their buffer (the first ring slots
  fill before that, during the last item's epilogue);
- two consumer warpgroups own one half of the rows each and take turns on the tensor cores
  (ping-pong, handed over on two named barriers): in its turn a consumer issues S_j = Q K_j^T
  and O += P_{j-1} V_{j-1}, hands the turn over, then runs the softmax of S_j while its own PV
  and the other consumer's MMAs run. Partial tiles are masked from the plan's per-row interval
  table.
The items run by KV head sections (the q heads of one KV head one after another, the plan's
heaviest q tiles first), dealt to the programs by stride (static grid) or fetched from a counter
(``dynamic``: forwards beside a collective in flight, whose late-starting programs then take
fewer items). A plan's tiles sit on the 128 grid, or are cut at the slices' bounds (each
document's tiles start at its first token, as FA4's varlen tiles) where that visits fewer pairs
(pick_plan; the cut code is its own specialisation, CUT). Registers move from the producer (24)
to the consumers (240) with setmaxnreg.

Measured on H200 (GQA 64:8, d128, bf16): 0.96-0.98x FA4 on full and causal at 16k and 64k,
0.91-0.98x on the document masks, 1.05-1.25x the Triton forward from 8k tokens on
(docs/design/ffa_kernels.md). Used by kernels.triton.fwd on sm90 where the inputs allow
(unsupported_reason) and the rows are long enough (plan_suits); otherwise the Triton forward runs.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                              warpgroup_mma, warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ..block_sparse import BlockSparsePlan
from .launch import _raw_stream, cached_launch

BLOCK_M = 128  # two consumer warpgroups of HALF_M rows
HALF_M = 64
BLOCK_N = 128
NUM_BUF = 3  # K/V ring slots: 2 ran 0.66-0.95x of 3 at d128 (docs/design/ffa_kernels.md)
# The softmax of S_j runs under P_{j-1} V_{j-1} (FA3's intra-warpgroup overlap; _wait_after
# keeps ptxas from hoisting the PV wait above the softmax) from this many listed key tiles per q
# tile on: +3 to +4.5% on full 16k (128 tiles), -1 to -6% on rows of ~9 tiles
# (docs/design/ffa_kernels.md).
UNDER_PV_MIN_TILES = 12.0
# The consumers' turns: named barriers TURN_BARRIER + c (bar.sync / bar.arrive of 256 threads, as
# FA3 and FA4 hand them over); Gluon's own barriers take the lowest ids.
TURN_BARRIER = 8
_TURN_SYNC_0 = gl.constexpr(f"bar.sync {TURN_BARRIER}, 256;")
_TURN_SYNC_1 = gl.constexpr(f"bar.sync {TURN_BARRIER + 1}, 256;")
_TURN_ARRIVE_0 = gl.constexpr(f"bar.arrive {TURN_BARRIER}, 256;")
_TURN_ARRIVE_1 = gl.constexpr(f"bar.arrive {TURN_BARRIER + 1}, 256;")
_WAIT_AFTER = gl.constexpr(".reg .pred p; setp.ne.b32 p, $2, 2147483647; "
                           "@p wgmma.wait_group.sync.aligned 0;")
CONSUMER_REGS, PRODUCER_REGS = 240, 24
MAXNREG = 168  # 12 warps x 32 x 168 <= 64K registers; setmaxnreg redistributes by partition
HEAD_DIMS = (64, 128)
LOG2E = 1.4426950408889634
# Below this many listed key tiles per q tile (at BLOCK_M x BLOCK_N) the Triton forward is as
# fast or faster: its 128x64 tiles waste less on short rows and it runs two programs per SM
# (H100: 0.95-1.00 of Gluon's time at 1.8-2.8 tiles, 1.04-1.38 from 4.5;
# docs/design/ffa_kernels.md).
MIN_TILES_PER_Q_TILE = 4.0
# A plan cut at the slices' bounds replaces the grid's where it costs less, an item's fixed cost
# counted as ITEM_PAIRS pairs (~3 us an item against ~1.7 us a pair at 16k): the documents at 16k
# visit 4-6% fewer pairs with ~8% more q tiles (docs/design/ffa_kernels.md).
ITEM_PAIRS = 2.0


def under_pv_suits(plan: BlockSparsePlan) -> bool:
    """Whether this plan's rows are long enough for the softmax under the PV to pay (tensor
    sizes only: no device sync)."""
    return plan.q_tile_kt.numel() >= UNDER_PV_MIN_TILES * max(plan.num_q_tiles, 1)


def pick_plan(grid: BlockSparsePlan, cut: BlockSparsePlan | None) -> BlockSparsePlan:
    """The plan of the two, the grid's or the one cut at the slices (None: not built), that
    costs less: visited pairs plus ITEM_PAIRS a q tile (tensor sizes only: no device sync)."""
    def cost(plan):
        return plan.q_tile_kt.numel() + ITEM_PAIRS * plan.num_q_tiles
    return cut if cut is not None and cost(cut) < cost(grid) else grid


def plan_suits(plan: BlockSparsePlan) -> bool:
    """Whether this plan's rows are long enough for the Gluon forward to beat the Triton one
    (tensor sizes only: no device sync)."""
    return (plan.row_lo.shape[1] > 0
            and plan.q_tile_kt.numel() >= MIN_TILES_PER_Q_TILE * max(plan.num_q_tiles, 1))


# Gluon is experimental and its API moves between releases (warp_specialize's signature, for
# one): written and tested against this one
TRITON_VERSION = (3, 6)


def _triton_version() -> tuple[int, int]:
    major, minor = triton.__version__.split(".")[:2]
    return int(major), int(minor)


def hopper_reason(q: torch.Tensor, k: torch.Tensor, what: str,
                  head_dims: tuple[int, ...] = HEAD_DIMS) -> str | None:
    """The checks every Gluon kernel of this backend shares (``what`` names the kernel):
    Triton release, sm90, dtype, head_dim, non-empty sequences. None when they pass."""
    if _triton_version() != TRITON_VERSION:
        return (f"the Gluon {what} is written for Triton {'.'.join(map(str, TRITON_VERSION))}, "
                f"this is {triton.__version__}")
    if not q.is_cuda or torch.cuda.get_device_capability(q.device)[0] != 9:
        return f"the Gluon {what} is written for sm90 (Hopper)"
    if q.dtype not in (torch.bfloat16, torch.float16):
        return f"the Gluon {what} takes bf16/fp16, got {q.dtype}"
    if q.shape[-1] not in head_dims:
        return f"the Gluon {what} takes head_dim {head_dims}, got {q.shape[-1]}"
    if q.shape[0] == 0 or k.shape[0] == 0:
        return "empty sequence"
    return None


def unsupported_reason(q: torch.Tensor, k: torch.Tensor, softcap: float,
                       return_max_logits: bool) -> str | None:
    """Why this forward cannot run these inputs (the Triton forward then does), or None."""
    if softcap > 0 or return_max_logits:
        return "softcap and max logits run on the Triton forward"
    return hopper_reason(q, k, "forward")


@gluon.jit
def _softmax(s, m_i, l_i, qk_scale, row_o: gl.constexpr):
    """Online softmax of one score tile (masked cells -inf): P, the new row max and sum, and O's
    rescale factor in O's row layout. Rows with nothing kept yet keep P = 0 and alpha = 0."""
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
    m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_use, 1))
    alpha = gl.exp2(m_i - m_use)
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_i, gl.convert_layout(alpha, row_o)


@gluon.jit
def _after_asm(x, ASM: gl.constexpr):
    """x (this thread's two row values, $2 and $3 in ASM) unchanged, after the instructions ASM:
    volatile, and x's later uses depend on them."""
    return gl.inline_asm_elementwise("{ " + ASM + " mov.b32 $0, $2; mov.b32 $1, $3; }",
                                     "=r,=r,r,r", [x], dtype=x.dtype, is_pure=False, pack=2)


@gluon.jit
def _store_o_staged(out, q_tile, o_desc, row0, q_col):
    """This consumer's O rows [row0, row0 + HALF_M) by TMA, staged in its Q buffer (Q is no
    longer read; the store is clipped at seqlen_q)."""
    q_tile.store(out)
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [row0, q_col], q_tile)


@gluon.jit
def _store_o(out, Out, row0, q_col, row_end, num_heads_q):
    """This consumer's O rows [row0, row_end) at columns q_col.. of Out [Sq, Hq * D], straight
    from the accumulator's layout (a q tile cut short, whose TMA store would write the next
    tile's rows)."""
    layout: gl.constexpr = out.type.layout
    rows = row0 + gl.arange(0, out.shape[0], layout=gl.SliceLayout(1, layout))
    cols = q_col + gl.arange(0, out.shape[1], layout=gl.SliceLayout(0, layout))
    # the stride (heads x HEAD_DIM) multiplied here, in volatile asm: ptxas cannot hoist it to
    # the kernel's entry, where it held a register across every loop and spilled
    stride = gl.inline_asm_elementwise(f"mul.lo.s32 $0, $1, {out.shape[1]};", "=r,r",
                                       [rows * 0 + num_heads_q], dtype=gl.int32, is_pure=False,
                                       pack=1)
    offs = gl.expand_dims(rows.to(gl.int64) * stride.to(gl.int64), 1) + gl.expand_dims(cols, 0)
    gl.store(Out + offs, out, mask=gl.expand_dims(rows < row_end, 1))


@gluon.jit
def _wait_after(x):
    """x unchanged, after a wait for every wgmma group of this warpgroup that ptxas cannot move
    above x's computation: predicated on x (never the one NaN bit pattern tested, so always
    taken), it depends on x. Without it ptxas hoists the plain wait (warpgroup_mma_wait(0),
    still issued after this, then free) to the top of the softmax, which then runs after
    P_{j-1} V_{j-1} instead of under it."""
    return _after_asm(x, _WAIT_AFTER)


@gluon.jit
def _masked(s, t, mid, key0, key1, lo1, hi1, key_lo, key_hi, row_lo, row_hi, rows, seqlen_q,
            col_s: gl.constexpr, BLOCK_N: gl.constexpr, ROW_INTERVALS: gl.constexpr,
            HOIST: gl.constexpr, CUT: gl.constexpr):
    """S with the cells outside the union at -inf when list position t is a partial tile, and
    (CUT) the keys past the tile's end (a tile cut short at a slice bound: they are the next
    tile's). ``key_lo``: per list entry the key tile (grid) or its first key (CUT); ``key_hi``
    (CUT): its end. HOIST (short rows, see _consumer): ``key0``, ``key1`` are those of entry t,
    loaded already (_key_span), and with one interval a row ``lo1``, ``hi1`` are the rows'
    (_row_interval); else both are read here."""
    STEP: gl.constexpr = 1 if CUT else BLOCK_N
    if t >= mid:
        if not HOIST:
            key0 = gl.load(key_lo + t)
            if CUT:
                key1 = gl.load(key_hi + t)
        cols = key0 * STEP + gl.arange(0, BLOCK_N, layout=col_s)
        c2 = gl.expand_dims(cols, 0)
        if HOIST and ROW_INTERVALS == 1:
            hi = hi1
            if CUT:
                hi = gl.minimum(hi, key1)
            keep = (c2 >= gl.expand_dims(lo1, 1)) & (c2 < gl.expand_dims(hi, 1))
        else:
            row_ok = rows < seqlen_q
            keep = (c2 < 0) & gl.expand_dims(rows < 0, 1)  # all False, [rows, cols]
            for r in gl.static_range(ROW_INTERVALS):
                lo = gl.load(row_lo + rows * ROW_INTERVALS + r, mask=row_ok, other=0)
                hi = gl.load(row_hi + rows * ROW_INTERVALS + r, mask=row_ok, other=0)
                if CUT:
                    hi = gl.minimum(hi, key1)
                keep = keep | ((c2 >= gl.expand_dims(lo, 1)) & (c2 < gl.expand_dims(hi, 1)))
        s = gl.where(keep, s, float("-inf"))
    return s


@gluon.jit
def _key_span(key_lo, key_hi, t, HOIST: gl.constexpr, CUT: gl.constexpr):
    """List entry t's key tile (grid) or first key, and (CUT) its end key, loaded now (HOIST:
    before the S wait) or by _masked (0 here)."""
    key0 = 0
    key1 = 0
    if HOIST:
        key0 = gl.load(key_lo + t)
        if CUT:
            key1 = gl.load(key_hi + t)
    return key0, key1


@gluon.jit
def _row_interval(table, rows, seqlen_q, ROW_INTERVALS: gl.constexpr, HOIST: gl.constexpr):
    """The rows' one kept-key bound from ``table`` (row_lo or row_hi; rows past seqlen_q: 0),
    loaded once an item where HOIST and one interval a row; else ``rows`` (unread)."""
    if HOIST and ROW_INTERVALS == 1:
        bound = gl.load(table + rows, mask=rows < seqlen_q, other=0)
    else:
        bound = rows
    return bound


@gluon.jit
def _turn_take(c: gl.constexpr, x):
    """Wait for consumer c's turn (returns x) on named barrier TURN_BARRIER + c, which the other
    consumer's 128 threads arrive at (bar.arrive, _turn_give) and this consumer's sync at
    (bar.sync, 256 threads in all); consumer 0 starts."""
    if c == 0:
        x = _after_asm(x, _TURN_SYNC_0)
    else:
        x = _after_asm(x, _TURN_SYNC_1)
    return x


@gluon.jit
def _turn_give(c: gl.constexpr, x):
    """Hand the tensor cores to the other consumer (returns x)."""
    if c == 0:
        x = _after_asm(x, _TURN_ARRIVE_1)
    else:
        x = _after_asm(x, _TURN_ARRIVE_0)
    return x


@gluon.jit
def _item(i, nqt, n_first, num_heads_q, q_tile_order, q_starts, q_tile_ptr, q_tile_num_full,
          group, HALF_M: gl.constexpr, HEAD_DIM: gl.constexpr, LPT: gl.constexpr,
          CUT: gl.constexpr):
    """Work item i: its first q row and the end of its rows (the next q tile's first), Q/O
    column, K/V column and the list span [start, end) of its key tiles (full ones below mid).
    LPT: by KV head sections (_item_tile); else (an Arrival's order) items run q tiles fastest,
    over the order's first n_first tiles for every head, then over the rest for every head."""
    q_tile, head = _item_tile(i, nqt, n_first, num_heads_q, q_tile_order, group, LPT)
    return _item_span(q_tile, head, q_starts, q_tile_ptr, q_tile_num_full, group, HALF_M,
                      HEAD_DIM, CUT)


@gluon.jit
def _item_tile(i, nqt, n_first, num_heads_q, q_tile_order, group, LPT: gl.constexpr):
    """Item i's q tile (one load) and head. LPT: the q heads of one KV head (a section) one after
    another, within a section the plan's heaviest-first q tiles with the section's heads
    fastest, so the items running at once share one KV head's keys while each program's sum of
    key tiles stays near the mean (with _static_item's deal): +5% on causal 16k, +11% on
    causal_document 16k, +0.3% on full (docs/design/ffa_kernels.md). Else see _item."""
    first_items = n_first * num_heads_q
    if LPT:
        within = i // group
        at = within % nqt
        head = (within - at) // nqt * group + (i - within * group)
    elif i < first_items:
        at = i % n_first
        head = i // n_first
    else:
        rest = gl.maximum(nqt - n_first, 1)
        at = n_first + (i - first_items) % rest
        head = (i - first_items) // rest
    return gl.load(q_tile_order + at), head


@gluon.jit
def _item_span(q_tile, head, q_starts, q_tile_ptr, q_tile_num_full, group, HALF_M: gl.constexpr,
               HEAD_DIM: gl.constexpr, CUT: gl.constexpr):
    """An item's rows, columns and list span from its q tile and head (three loads, five with
    CUT: the tile's rows from the plan's q_starts; see _item)."""
    start = gl.load(q_tile_ptr + q_tile)
    end = gl.load(q_tile_ptr + q_tile + 1)
    mid = start + gl.load(q_tile_num_full + q_tile)
    if CUT:
        q_row = gl.load(q_starts + q_tile)
        row_end = gl.load(q_starts + q_tile + 1)
    else:
        q_row = q_tile * 2 * HALF_M
        row_end = q_row + 2 * HALF_M  # (unread: the grid's rows end at a tile or seqlen_q)
    return q_row, row_end, head * HEAD_DIM, (head // group) * HEAD_DIM, start, mid, end


@gluon.jit
def _fetch(sched, t, DYNAMIC: gl.constexpr, n_items, LPT: gl.constexpr):
    """The producer's t-th item: this program's t-th of the static grid, or the next of a counter
    shared by the grid (DYNAMIC: a program that starts late, e.g. behind a collective's CTAs,
    takes fewer items). Each program fetches once past the end, so the grid's last fetch is
    n_items + programs - 1: that one zeroes the counter for the next launch on this stream."""
    if DYNAMIC:
        i = gl.atomic_add(sched, 1)
        if i == n_items + gl.num_programs(0) - 1:
            gl.store(sched, 0)
    else:
        i = _static_item(t, LPT)
    return i


@gluon.jit
def _static_item(t, LPT: gl.constexpr):
    """The static grid's t-th item of this program. LPT: each turn's items dealt boustrophedon
    (program p takes the p-th of an even turn, the (programs - 1 - p)-th of an odd one), so a
    program's sum of key tiles stays near the mean over the heaviest-first order."""
    p = gl.program_id(0)
    programs = gl.num_programs(0)
    if LPT:
        if t % 2 == 1:
            p = programs - 1 - p
    return p + t * programs


@gluon.jit
def _put_item(items, t, i):
    """The producer hands item index i to the consumers in shared-memory slot t % 2 (before
    the arrive on that item's Q barrier, which orders it for them)."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    items.index(t % 2).store(gl.full([32], i, gl.int32, layout))
    gl.thread_barrier()  # every lane's store before the one thread's arrive that releases them


@gluon.jit
def _fetched(items, t, q_bars, c: gl.constexpr, DYNAMIC: gl.constexpr, LPT: gl.constexpr):
    """Consumer c's t-th item (DYNAMIC: once its Q barrier has passed, from the producer's
    slot; the producer arrives there without a Q past the end)."""
    if DYNAMIC:
        mbarrier.wait(q_bars.index(c), t & 1)
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        i = gl.max(items.index(t % 2).load(layout), axis=0)
    else:
        i = _static_item(t, LPT)
    return i


@gluon.jit
def _await_arrival(arrival, late, kt, seen):
    """Spin until arrival[0] != 0 before the first load of a key tile marked in ``late`` (keys
    a collective is still writing: the stream sets the flag once they have all landed);
    ``seen``: the flag was already observed by this program."""
    if seen == 0:
        if gl.load(late + kt) != 0:
            while gl.load(arrival, volatile=True) == 0:
                pass
            seen = 1
    return seen


@gluon.jit
def _producer(args, ROW_INTERVALS: gl.constexpr, DYNAMIC: gl.constexpr, WAIT: gl.constexpr,
              UNDER_PV: gl.constexpr, CUT: gl.constexpr):
    (q_desc, k_desc, v_desc, o_desc, Out, Lse, q_tile_ptr, q_starts, q_tile_kt, key_lo, key_hi,
     q_tile_num_full, q_tile_order, row_lo, row_hi, seqlen_q, num_heads_q, qk_scale, group,
     n_items, nqt, n_first, sched, arrival, late, q_smem, k_smem, v_smem, q_bars, q_empty,
     k_ready, v_ready, kv_empty, items) = args
    NUM_BUF: gl.constexpr = k_smem.type.shape[0]
    HALF_M: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    LPT: gl.constexpr = not WAIT  # (an Arrival's order: its own first tiles)
    loaded = 0  # K/V tiles loaded by this program so far: the ring's running position
    seen = 0  # the arrival flag observed (WAIT)
    t = 0  # items done
    i = _fetch(sched, t, DYNAMIC, n_items, LPT)
    while i < n_items:
        q_row, _, q_col, kv_col, start, mid, end = _item(i, nqt, n_first, num_heads_q,
                                                         q_tile_order, q_starts, q_tile_ptr,
                                                         q_tile_num_full, group, HALF_M,
                                                         HEAD_DIM, LPT, CUT)
        # the first key tiles go before Q: their slots free up before the last item's
        # epilogue ends, Q's only after it (the consumers stage O in Q's buffer)
        first = gl.minimum(end - start, NUM_BUF)
        for j in range(first):
            seen = _load_kv(k_desc, v_desc, q_tile_kt, key_lo, start + j, kv_col, loaded + j,
                            k_smem, v_smem, k_ready, v_ready, kv_empty, arrival, late, seen, WAIT,
                            CUT)
        if DYNAMIC:
            _put_item(items, t, i)
        for c in gl.static_range(2):
            mbarrier.wait(q_empty.index(c), (t & 1) ^ 1)  # fresh barriers pass
            mbarrier.expect(q_bars.index(c), q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [q_row + c * HALF_M, q_col], q_bars.index(c),
                                            q_smem.index(c))
        # the next item now, while this one's first tiles and Q are in flight (a counter's
        # round trip stalls this warp)
        i = _fetch(sched, t + 1, DYNAMIC, n_items, LPT)
        for j in range(first, end - start):
            seen = _load_kv(k_desc, v_desc, q_tile_kt, key_lo, start + j, kv_col, loaded + j,
                            k_smem, v_smem, k_ready, v_ready, kv_empty, arrival, late, seen, WAIT,
                            CUT)
        loaded += end - start
        t += 1
    if DYNAMIC:  # the consumers learn the end from the index: release them without a Q
        _put_item(items, t, i)
        for c in gl.static_range(2):
            mbarrier.wait(q_empty.index(c), (t & 1) ^ 1)
            mbarrier.arrive(q_bars.index(c), count=1)


@gluon.jit
def _load_kv(k_desc, v_desc, q_tile_kt, key_lo, t, kv_col, n, k_smem, v_smem, k_ready, v_ready,
             kv_empty, arrival, late, seen, WAIT: gl.constexpr, CUT: gl.constexpr):
    """K and V of list entry t (BLOCK_N keys from its first: ``key_lo``'s entry t, a key tile
    on the grid, a key with CUT) into the ring's n-th position (once its slot is released, and
    with WAIT once keys still in flight have landed). Returns ``seen`` (see _await_arrival)."""
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    NUM_BUF: gl.constexpr = k_smem.type.shape[0]
    slot = n % NUM_BUF
    kt = gl.load(key_lo + t)
    k_lo = kt if CUT else kt * BLOCK_N
    if WAIT:
        if CUT:
            kt = gl.load(q_tile_kt + t)
        seen = _await_arrival(arrival, late, kt, seen)
    mbarrier.wait(kv_empty.index(slot), ((n // NUM_BUF) & 1) ^ 1)  # fresh barriers pass
    mbarrier.expect(k_ready.index(slot), k_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [k_lo, kv_col], k_ready.index(slot),
                                    k_smem.index(slot))
    mbarrier.expect(v_ready.index(slot), v_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(v_desc, [k_lo, kv_col], v_ready.index(slot),
                                    v_smem.index(slot))
    return seen


@gluon.jit
def _consumer_loop(q_tile, k_smem, v_smem, k_ready, v_ready, kv_empty, key_lo, key_hi, row_lo,
                   row_hi, rows, lo1, hi1, seqlen_q, start, mid, n_tiles, base, qk_scale, m_i,
                   l_i, acc, c: gl.constexpr, s_layout: gl.constexpr, p_layout: gl.constexpr,
                   ROW_INTERVALS: gl.constexpr, UNDER_PV: gl.constexpr, HOIST: gl.constexpr,
                   CUT: gl.constexpr):
    """This consumer's rows over the q tile's n_tiles (>= 1) listed key tiles, which sit at the
    ring's running positions base.. ."""
    BLOCK_N: gl.constexpr = k_smem.type.shape[1]
    NUM_BUF: gl.constexpr = k_smem.type.shape[0]
    HALF_M: gl.constexpr = q_tile.type.shape[0]
    dtype: gl.constexpr = q_tile.dtype
    col_s: gl.constexpr = gl.SliceLayout(0, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, p_layout.parent)
    s_zero = gl.zeros([HALF_M, BLOCK_N], gl.float32, s_layout)

    # tile 0: S_0 in this consumer's first turn
    mbarrier.wait(k_ready.index(base % NUM_BUF), (base // NUM_BUF) & 1)
    rows = _turn_take(c, rows)
    s = warpgroup_mma(q_tile, k_smem.index(base % NUM_BUF).permute((1, 0)), s_zero,
                      use_acc=False, is_async=True)
    rows = _turn_give(c, rows)
    key0, key1 = _key_span(key_lo, key_hi, start, HOIST, CUT)
    s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))
    s = _masked(s, start, mid, key0, key1, lo1, hi1, key_lo, key_hi, row_lo, row_hi, rows,
                seqlen_q, col_s, BLOCK_N, ROW_INTERVALS, HOIST, CUT)
    p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, row_o)
    p = gl.convert_layout(p.to(dtype), p_layout)

    for j in range(1, n_tiles):
        n = base + j
        slot = n % NUM_BUF
        prev = (n - 1) % NUM_BUF
        mbarrier.wait(k_ready.index(slot), (n // NUM_BUF) & 1)
        mbarrier.wait(v_ready.index(prev), ((n - 1) // NUM_BUF) & 1)
        rows = _turn_take(c, rows)
        s = warpgroup_mma(q_tile, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False,
                          is_async=True)
        acc = warpgroup_mma(p, v_smem.index(prev), acc, is_async=True)
        rows = _turn_give(c, rows)
        key0, key1 = _key_span(key_lo, key_hi, start + j, HOIST, CUT)
        s = warpgroup_mma_wait(num_outstanding=1, deps=(s, ))  # S_j done, PV_{j-1} may run
        s = _masked(s, start + j, mid, key0, key1, lo1, hi1, key_lo, key_hi, row_lo, row_hi,
                    rows, seqlen_q, col_s, BLOCK_N, ROW_INTERVALS, HOIST, CUT)
        p_new, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, row_o)
        if UNDER_PV:
            l_i = _wait_after(l_i)
        acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))
        mbarrier.arrive(kv_empty.index(prev), count=1)  # tile j-1's K and V are read
        acc = acc * gl.expand_dims(alpha, 1)
        p = gl.convert_layout(p_new.to(dtype), p_layout)

    n = base + n_tiles - 1
    last = n % NUM_BUF
    mbarrier.wait(v_ready.index(last), (n // NUM_BUF) & 1)
    rows = _turn_take(c, rows)
    acc = warpgroup_mma(p, v_smem.index(last), acc, is_async=True)
    rows = _turn_give(c, rows)
    acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))
    mbarrier.arrive(kv_empty.index(last), count=1)
    return acc, m_i, l_i


@gluon.jit
def _consumer(args, ROW_INTERVALS: gl.constexpr, DYNAMIC: gl.constexpr, WAIT: gl.constexpr,
              UNDER_PV: gl.constexpr, CUT: gl.constexpr, c: gl.constexpr):
    """Consumer warpgroup c: the rows [c * HALF_M, (c + 1) * HALF_M) of every item."""
    (q_desc, k_desc, v_desc, o_desc, Out, Lse, q_tile_ptr, q_starts, q_tile_kt, key_lo, key_hi,
     q_tile_num_full, q_tile_order, row_lo, row_hi, seqlen_q, num_heads_q, qk_scale, group,
     n_items, nqt, n_first, sched, arrival, late, q_smem, k_smem, v_smem, q_bars, q_empty,
     k_ready, v_ready, kv_empty, items) = args
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    HALF_M: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    dtype: gl.constexpr = q_desc.dtype
    LPT: gl.constexpr = not WAIT
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    q_tile = q_smem.index(c)
    loaded = 0  # the ring's running position (as the producer counts it)
    if c == 1:  # consumer 0's first turn
        _after_asm(gl.arange(0, HALF_M, layout=row_s), _TURN_ARRIVE_0)
    t = 0
    i = _fetched(items, t, q_bars, c, DYNAMIC, LPT)
    # Short rows (no softmax under the PV) hide two global round trips: HOIST, a partial tile's
    # key tile and the rows' one interval loaded before the wait for S_j (with two intervals a
    # row the consumers spilled 8 bytes, head_dim 128), and PREFETCH, the next item's q tile and
    # list span loaded while this one runs (static grid: a dynamic one learns its next item from
    # the producer). Both: +4.9% on causal_document 16k, +2.2% on sliding_window_causal; on long
    # rows -3.3% (full), so not there (docs/design/ffa_kernels.md).
    HOIST: gl.constexpr = not UNDER_PV and ROW_INTERVALS == 1
    PREFETCH: gl.constexpr = not UNDER_PV and not DYNAMIC
    if PREFETCH:  # (an index past the end reads the last item: unused)
        n_row, n_rend, n_qcol, n_kvcol, n_start, n_mid, n_end = _item(
            gl.minimum(i, n_items - 1), nqt, n_first, num_heads_q, q_tile_order, q_starts,
            q_tile_ptr, q_tile_num_full, group, HALF_M, HEAD_DIM, LPT, CUT)
    while i < n_items:
        if PREFETCH:
            q_row, row_end, q_col, kv_col = n_row, n_rend, n_qcol, n_kvcol
            start, mid, end = n_start, n_mid, n_end
            # the next item's q tile now, its span after this item's loop (the tile has
            # arrived by then): neither load's latency lies between two items
            n_tile, n_head = _item_tile(
                gl.minimum(_fetched(items, t + 1, q_bars, c, DYNAMIC, LPT), n_items - 1), nqt,
                n_first, num_heads_q, q_tile_order, group, LPT)
        else:
            q_row, row_end, q_col, kv_col, start, mid, end = _item(
                i, nqt, n_first, num_heads_q, q_tile_order, q_starts, q_tile_ptr,
                q_tile_num_full, group, HALF_M, HEAD_DIM, LPT, CUT)
        row0 = q_row + c * HALF_M
        rows = row0 + gl.arange(0, HALF_M, layout=row_s)
        m_i = gl.full([HALF_M], float("-inf"), gl.float32, row_s)
        l_i = gl.zeros([HALF_M], gl.float32, row_s)
        acc = gl.zeros([HALF_M, HEAD_DIM], gl.float32, o_layout)
        # (before the Q wait: the loads' latency under it)
        lo1 = _row_interval(row_lo, rows, seqlen_q, ROW_INTERVALS, HOIST)
        hi1 = _row_interval(row_hi, rows, seqlen_q, ROW_INTERVALS, HOIST)
        if not DYNAMIC:  # (DYNAMIC: waited for in _fetched)
            mbarrier.wait(q_bars.index(c), t & 1)
        if end > start:
            acc, m_i, l_i = _consumer_loop(q_tile, k_smem, v_smem, k_ready, v_ready, kv_empty,
                                           key_lo, key_hi, row_lo, row_hi, rows, lo1, hi1,
                                           seqlen_q, start, mid, end - start, loaded, qk_scale,
                                           m_i, l_i, acc, c, s_layout, p_layout, ROW_INTERVALS,
                                           UNDER_PV, HOIST, CUT)
        loaded += end - start
        if PREFETCH:
            n_row, n_rend, n_qcol, n_kvcol, n_start, n_mid, n_end = _item_span(
                n_tile, n_head, q_starts, q_tile_ptr, q_tile_num_full, group, HALF_M, HEAD_DIM,
                CUT)

        has_keys = l_i > 0.0
        l_o = gl.convert_layout(gl.where(has_keys, l_i, 1.0), row_o)
        out = acc / gl.expand_dims(l_o, 1)
        if CUT:
            if (row_end >= row0 + HALF_M) | (row_end == seqlen_q):
                _store_o_staged(out.to(dtype), q_tile, o_desc, row0, q_col)
            else:  # a q tile cut short at a slice bound: the rows past its end are another's
                _store_o(out.to(dtype), Out, row0, q_col, row_end, num_heads_q)
        else:
            _store_o_staged(out.to(dtype), q_tile, o_desc, row0, q_col)
        lse = gl.where(has_keys,
                       (m_i + gl.log2(gl.where(has_keys, l_i, 1.0))) * 0.6931471805599453,
                       float("-inf"))
        gl.store(Lse + rows.to(gl.int64) * num_heads_q + (q_col // HEAD_DIM), lse,
                 mask=rows < (row_end if CUT else seqlen_q))
        tma.store_wait(pendings=0)
        mbarrier.arrive(q_empty.index(c), count=1)  # the buffer may take the next item's Q
        t += 1
        i = _fetched(items, t, q_bars, c, DYNAMIC, LPT)
    if c == 0:  # consumer 1's last hand-over (its first was the one above)
        _after_asm(gl.arange(0, HALF_M, layout=row_s), _TURN_SYNC_0)


@gluon.jit
def _fwd_kernel(q_desc, k_desc, v_desc, o_desc, Out, Lse, q_tile_ptr, q_starts, q_tile_kt, key_lo,
                key_hi, q_tile_num_full, q_tile_order, row_lo, row_hi, seqlen_q, num_heads_q,
                qk_scale, group, n_items, nqt, n_first, sched, arrival, late,
                NUM_BUF: gl.constexpr, ROW_INTERVALS: gl.constexpr, DYNAMIC: gl.constexpr,
                WAIT: gl.constexpr, UNDER_PV: gl.constexpr, CUT: gl.constexpr,
                CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
                num_warps: gl.constexpr):
    HALF_M: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [2, HALF_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
    # DYNAMIC: the item index the producer fetched, one slot an item parity
    items = gl.allocate_shared_memory(gl.int32, [2, 32],
                                      gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    for i in gl.static_range(2):
        mbarrier.init(q_bars.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=1)
    for i in gl.static_range(NUM_BUF):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=2)  # both consumers release a tile
    fence_async_shared()
    args = (q_desc, k_desc, v_desc, o_desc, Out, Lse, q_tile_ptr, q_starts, q_tile_kt, key_lo,
            key_hi, q_tile_num_full, q_tile_order, row_lo, row_hi, seqlen_q, num_heads_q, qk_scale,
            group, n_items, nqt, n_first, sched, arrival, late, q_smem, k_smem, v_smem, q_bars,
            q_empty, k_ready, v_ready, kv_empty, items)
    gl.warp_specialize([(_consumer, (args, ROW_INTERVALS, DYNAMIC, WAIT, UNDER_PV, CUT, 0)),
                        (_consumer, (args, ROW_INTERVALS, DYNAMIC, WAIT, UNDER_PV, CUT, 1)),
                        (_producer, (args, ROW_INTERVALS, DYNAMIC, WAIT, UNDER_PV, CUT))],
                       [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


_launch_fwd_kernel = cached_launch(_fwd_kernel)


def tma_rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` [S, H, D] itself where its [S, H * D] view is a legal TMA source (heads packed,
    row stride and base 16-byte aligned), else a contiguous, aligned copy. So a strided view is
    read in place, e.g. K or V as the halves of the CP runtime's fused KV buffer [S, 2 * Hkv, D]:
    copying them cost ~0.1 ms a call at 16k tokens a rank."""
    packed = t.shape[1] == 1 or t.stride(1) == t.shape[2]
    if (t.stride(2) == 1 and packed and t.stride(0) * t.element_size() % 16 == 0
            and t.data_ptr() % 16 == 0):
        return t
    # a fresh allocation: .contiguous() would keep a contiguous tensor at a misaligned base
    return t.clone(memory_format=torch.contiguous_format)


def _descriptor(t: torch.Tensor, block_rows: int) -> TensorDescriptor:
    """[S, H, D] as a 2-D [S, H * D] TMA view, one head per column block of D."""
    rows, _, head_dim = t.shape
    view = t.view(rows, -1)
    return TensorDescriptor(view, list(view.shape), list(view.stride()), [block_rows, head_dim],
                            shared_layout(block_rows, head_dim, t.dtype))


@functools.lru_cache(maxsize=None)
def shared_layout(rows: int, cols: int, dtype: torch.dtype):
    """The NVMMA shared layout of a [rows, cols] TMA block (built once: ~60% of a descriptor's
    host time per call)."""
    gdt = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16, torch.float32: gl.float32}
    return gl.NVMMASharedLayout.get_default_for([rows, cols], gdt[dtype])


@dataclass(frozen=True)
class Arrival:
    """Keys the forward may start without: the key tiles marked in ``late`` (int8 [key tiles
    of BLOCK_N], on the device) hold rows still being written (a collective's landing zone),
    and ``flag`` (int32 [1], on the device) turns non-zero once they have all landed, set by
    the stream (no kernel: see magi_attention.comm.stream_flag). ``order``: the q tiles, those
    that list no late tile first (``n_first`` of them), each group in the plan's heaviest-first
    order (``arrival_order``). The grid then fetches its items from a counter, so programs
    that wait or start late take fewer."""
    flag: torch.Tensor
    late: torch.Tensor
    order: torch.Tensor
    n_first: int


def late_tiles(num_key_tiles: int, block_n: int, rows, k_starts=None) -> np.ndarray:
    """int8 [num_key_tiles]: 1 where a key tile of ``block_n`` (or, given a plan's ``k_starts``,
    the tile [k_starts[j], k_starts[j + 1])) meets one of the row ranges ``rows``
    [(start, end)], else 0."""
    if k_starts is None:
        k_starts = np.arange(num_key_tiles + 1) * block_n
    late = np.zeros(num_key_tiles, dtype=np.int8)
    for start, end in rows:
        if end > start:
            first = np.searchsorted(k_starts, start, side="right") - 1
            last = np.searchsorted(k_starts, end - 1, side="right") - 1
            late[max(first, 0):min(last + 1, num_key_tiles)] = 1
    return late


def arrival_order(plan: BlockSparsePlan, late: np.ndarray) -> tuple[np.ndarray, int]:
    """(q tile order, n_first): the plan's order with the q tiles that list no key tile marked
    in ``late`` moved first, both groups keeping their order (host arrays: key time)."""
    order = plan.q_tile_order.cpu().numpy()
    ptr, kt = plan.q_tile_ptr.cpu().numpy(), plan.q_tile_kt.cpu().numpy()
    owner = np.repeat(np.arange(plan.num_q_tiles), np.diff(ptr))
    reads = np.zeros(plan.num_q_tiles, dtype=bool)
    reads[owner[np.asarray(late, dtype=bool)[kt]]] = True
    first, rest = order[~reads[order]], order[reads[order]]
    return np.concatenate([first, rest]).astype(np.int32), int(first.size)


def launch_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: BlockSparsePlan,
               softmax_scale: float, dynamic: bool = False, arrival: Arrival | None = None,
               under_pv: bool | None = None):
    """q [Sq, Hq, D], k/v [Sk, Hkv, D] (strided views read in place: tma_rows) over a BLOCK_M
    x BLOCK_N plan with a row interval table -> (out, lse [Sq, Hq] fp32, None).
    ``dynamic``: the programs fetch items from a counter instead of striding over them (for
    forwards beside a collective, whose late-starting programs then take fewer); ``arrival``:
    start before some keys have landed (dynamic then, in the Arrival's order); ``under_pv``
    (None: under_pv_suits): the softmax of S_j under P_{j-1} V_{j-1}."""
    seqlen_q, num_heads_q, _ = q.shape
    if plan.block_m != BLOCK_M:
        raise ValueError(f"plan q tiles {plan.block_m} != {BLOCK_M}")
    if plan.row_lo.shape[1] == 0:
        raise ValueError("the Gluon forward masks partial tiles from the row interval table; "
                         "this plan has none (too many intervals per row)")
    dynamic = bool(dynamic) or arrival is not None
    if under_pv is None:
        under_pv = under_pv_suits(plan)
    n_items = plan.num_q_tiles * num_heads_q
    q, k, v = (tma_rows(t) for t in (q, k, v))  # read by TMA alone: strided views in place
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(seqlen_q, num_heads_q, dtype=torch.float32, device=q.device)
    if n_items > 0:
        programs = min(n_items, _sm_count(q.device))
        sched = _schedule_buffer(q.device) if dynamic else lse  # (unread when static)
        order, n_first = ((arrival.order, arrival.n_first) if arrival is not None
                          else (plan.q_tile_order, plan.num_q_tiles))
        flag, late = (arrival.flag, arrival.late) if arrival is not None else (lse, lse)
        # every integer argument follows from these (cached_launch)
        key = (q.shape, k.shape, q.dtype, plan.block_n, plan.num_q_tiles, plan.row_lo.shape[1],
               programs, n_first, dynamic, arrival is not None, under_pv,
               plan.cut_at_slices) if q.is_cuda else None
        _launch_fwd_kernel((programs, ), key,
            _descriptor(q, HALF_M), _descriptor(k, plan.block_n), _descriptor(v, plan.block_n),
            _descriptor(out, HALF_M), out, lse, plan.q_tile_ptr, plan.q_starts, plan.q_tile_kt,
            # per list entry its first key (cut tiles) or its key tile (the grid's: i * BLOCK_N)
            plan.q_tile_klo if plan.cut_at_slices else plan.q_tile_kt, plan.q_tile_khi,
            plan.q_tile_num_full, order, plan.row_lo, plan.row_hi, seqlen_q, num_heads_q,
            float(softmax_scale) * LOG2E, num_heads_q // k.shape[1], n_items, plan.num_q_tiles,
            n_first, sched, flag, late,
            NUM_BUF=NUM_BUF, ROW_INTERVALS=plan.row_lo.shape[1], DYNAMIC=dynamic,
            WAIT=arrival is not None, UNDER_PV=bool(under_pv), CUT=plan.cut_at_slices,
            CONSUMER_REGS=CONSUMER_REGS, PRODUCER_REGS=PRODUCER_REGS, num_warps=4,
            maxnreg=MAXNREG)
    return out, lse, None


def _schedule_buffer(device: torch.device) -> torch.Tensor:
    """The dynamic grid's item counter (int32 [1]) of the current stream, zero between launches
    (the grid's last fetch resets it). One a stream, so launches on two streams at once never
    share a counter."""
    if device.type != "cuda":
        return torch.zeros(1, dtype=torch.int32, device=device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (index, _raw_stream(index))
    buf = _SCHEDULE_BUFFERS.get(key)
    if buf is None:
        buf = torch.zeros(1, dtype=torch.int32, device=device)
        _SCHEDULE_BUFFERS[key] = buf
    return buf


_SCHEDULE_BUFFERS: dict = {}
HOPPER_SMS = 132  # H100 / H200 SXM: the grid of compile-only runs off the GPU (CPU tests)


@functools.lru_cache(maxsize=None)
def _sm_count(device: torch.device) -> int:
    """Multiprocessors of the device (host-side properties, read once)."""
    if device.type != "cuda":
        return HOPPER_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count
