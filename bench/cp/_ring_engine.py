"""Ring attention over a (double) ring of ranks: forward, backward, autograd.Function.

One engine serves Ring P2P, USP (its ring part), LoongTrain and HybridCP. The ring has
``num_windows x window_size`` members; member ``c = w * window_size + p`` sits in window w at
position p. At outer step o and inner step j, member c holds the KV block of member
``((w - o) mod num_windows, (p - j) mod window_size)``. KV moves one position along the inner ring
(within a window) at each inner step, and one window along the outer ring (same position) at each
outer step; both transfers are in flight while the block in hand is computed. A plain ring is
one window (``window_size = ring size``); LoongTrain's double ring has several.

Forward: partial (out, lse) of each block merged by lse. Backward: each block's dq share
accumulates locally; its dk, dv accumulate in fp32 on a buffer that travels the inner ring with
the KV, and whose window sums then travel the outer ring back to the block's owner.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from magi_attention.common import AttnSlice
from magi_attention.functional import merge_out_lse

from ._ring import RingComm
from ._sharding import Layout, layout_len, local_slices
from ._stats import CommStats
from .local_kernel import LocalKernel, LocalMask, make_local_mask

# gloo matches p2p messages by (peer, tag): keep the four rings of one step apart.
TAG_KV_INNER, TAG_KV_OUTER, TAG_DKV_INNER, TAG_DKV_OUTER = 11, 12, 13, 14


@dataclass
class RingPlan:
    """Who this rank exchanges with, and the exact sub-mask of every step (host work, untimed).

    ring_ranks: global ranks of the ring members in ring order; my_index: this rank's member
    index; window_size: members per inner ring; kv_lengths: local KV length of every member;
    step_masks[o][j]: mask of my q rows x the KV block held at outer step o, inner step j.
    """

    group: object
    ring_ranks: list[int]
    my_index: int
    window_size: int
    kv_lengths: list[int]
    step_masks: list[list[LocalMask]]

    @property
    def num_windows(self) -> int:
        return len(self.ring_ranks) // self.window_size

    def source(self, outer: int, inner: int) -> int:
        """Member index whose KV block this rank holds at (outer, inner)."""
        w, p = divmod(self.my_index, self.window_size)
        return ((w - outer) % self.num_windows) * self.window_size + (p - inner) % self.window_size

    def _member(self, w: int, p: int) -> int:
        return self.ring_ranks[(w % self.num_windows) * self.window_size + p % self.window_size]

    def comms(self, stats: CommStats, direction: str) -> tuple[RingComm, RingComm, RingComm, RingComm]:
        """(kv inner, kv outer, dkv inner, dkv outer) ring comms of this rank."""
        w, p = divmod(self.my_index, self.window_size)
        inner = (self._member(w, p + 1), self._member(w, p - 1))
        outer = (self._member(w + 1, p), self._member(w - 1, p))
        return (RingComm(self.group, *inner, TAG_KV_INNER, stats, direction, "kv inner ring"),
                RingComm(self.group, *outer, TAG_KV_OUTER, stats, direction, "kv outer ring"),
                RingComm(self.group, *inner, TAG_DKV_INNER, stats, direction, "dkv inner ring"),
                RingComm(self.group, *outer, TAG_DKV_OUTER, stats, direction, "dkv outer ring"))


def make_ring_plan(mask_slices: list[AttnSlice], member_layouts: list[Layout], ring_ranks: list[int],
                   my_index: int, window_size: int, group) -> RingPlan:
    """Plan of a ring whose member m holds the tokens ``member_layouts[m]`` (q and KV alike)."""
    size = len(ring_ranks)
    if size % window_size:
        raise ValueError(f"window_size={window_size} must divide the ring size {size}")
    plan = RingPlan(group, ring_ranks, my_index, window_size,
                    [layout_len(m) for m in member_layouts], [])
    q_layout = member_layouts[my_index]
    plan.step_masks = [[make_local_mask(local_slices(mask_slices, q_layout,
                                                     member_layouts[plan.source(o, j)]))
                        for j in range(window_size)] for o in range(plan.num_windows)]
    return plan


def _kv_shape(plan: RingPlan, member: int, like: torch.Tensor) -> tuple[int, ...]:
    return (2, plan.kv_lengths[member]) + tuple(like.shape[2:])


def ring_fwd(q, k, v, plan: RingPlan, kernel: LocalKernel, stats: CommStats):
    """q: [Lq, Hq, D], k/v: [Lkv, Hkv, D] -> (out [Lq, Hq, D], lse [Lq, Hq] fp32).

    The first block's (out, lse) is taken as it comes (q's dtype: a ring of one member, cp 1,
    costs the kernel alone); every later block is merged into an fp32 accumulator."""
    kv_inner, kv_outer_comm, _, _ = plan.comms(stats, "fwd")
    num_windows, window = plan.num_windows, plan.window_size
    out = lse = None
    kv_outer = torch.stack([k, v])
    for o in range(num_windows):
        if o + 1 < num_windows:
            kv_outer_comm.exchange(kv_outer, _kv_shape(plan, plan.source(o + 1, 0), kv_outer))
        kv = kv_outer
        for j in range(window):
            if j + 1 < window:
                kv_inner.exchange(kv, _kv_shape(plan, plan.source(o, j + 1), kv))
            mask = plan.step_masks[o][j]
            if len(mask):
                block_out, block_lse = kernel.fwd(q, kv[0], kv[1], mask)
                out, lse = ((block_out, block_lse) if out is None
                            else merge_out_lse(out, lse, block_out, block_lse))
            if j + 1 < window:
                kv = kv_inner.wait()
        if o + 1 < num_windows:
            kv_outer = kv_outer_comm.wait()
    if out is None:  # no key of the whole sequence is visible to these rows
        out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        lse = torch.full(q.shape[:2], -math.inf, dtype=torch.float32, device=q.device)
    return out, lse


def _block_grads(dout, q, kv, out, lse, mask, kernel, travels: bool):
    """(this block's dq share or None, its [2, Lkv, Hkv, D] dkv): fp32 when ``travels`` (the
    buffer accumulates other members' grads along the ring), else in the kernel's dtype."""
    grads = kernel.bwd(dout, q, kv[0], kv[1], out, lse, mask)
    if grads is None:
        return None, torch.zeros(kv.shape, dtype=torch.float32 if travels else kv.dtype,
                                 device=kv.device)
    dkv = torch.stack([grads[1], grads[2]])
    return grads[0], dkv.float() if travels else dkv


def ring_bwd(dout, q, k, v, out, lse, plan: RingPlan, kernel: LocalKernel, stats: CommStats):
    """Gradients (dq, dk, dv) of ``ring_fwd`` in the input dtypes; ``out``, ``lse`` the merged ones."""
    kv_inner, kv_outer_comm, dkv_inner, dkv_outer = plan.comms(stats, "bwd")
    num_windows, window = plan.num_windows, plan.window_size
    travels = len(plan.ring_ranks) > 1
    dq = None  # the first share as it comes, then an fp32 sum
    kv_outer = torch.stack([k, v])
    dkv = None
    for o in range(num_windows):
        if o + 1 < num_windows:
            kv_outer_comm.exchange(kv_outer, _kv_shape(plan, plan.source(o + 1, 0), kv_outer))
        kv = kv_outer
        for j in range(window):
            if j + 1 < window:
                kv_inner.exchange(kv, _kv_shape(plan, plan.source(o, j + 1), kv))
            share, block = _block_grads(dout, q, kv, out, lse, plan.step_masks[o][j], kernel,
                                        travels)
            if share is not None:
                dq = share if dq is None else dq.float() + share
            # the buffer arriving now carries the earlier members' grads of the block in hand
            dkv = block if j == 0 else dkv_inner.wait() + block
            if window > 1:
                # after the last inner step this delivers each block's window sum to its holder
                dkv_inner.exchange(dkv, _kv_shape(plan, plan.source(o, j + 1), kv))
            if j + 1 < window:
                kv = kv_inner.wait()
        if window > 1:
            dkv = dkv_inner.wait()
        if num_windows > 1:
            if o > 0:
                dkv = dkv + dkv_outer.wait()
            dkv_outer.exchange(dkv, _kv_shape(plan, plan.source(o + 1, 0), kv_outer))
        if o + 1 < num_windows:
            kv_outer = kv_outer_comm.wait()
    if num_windows > 1:
        dkv = dkv_outer.wait()
    dq = torch.zeros_like(q) if dq is None else dq.to(q.dtype)
    return dq, dkv[0].to(k.dtype), dkv[1].to(v.dtype)


class RingAttnFunc(torch.autograd.Function):
    """Ring attention with autograd: ``RingAttnFunc.apply(q, k, v, plan, kernel, stats)``."""

    @staticmethod
    def forward(ctx, q, k, v, plan, kernel, stats):
        out, lse = ring_fwd(q, k, v, plan, kernel, stats)
        out = out.to(q.dtype)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.args = (plan, kernel, stats)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ring_bwd(dout.contiguous(), q, k, v, out, lse, *ctx.args)
        return dq, dk, dv, None, None, None
