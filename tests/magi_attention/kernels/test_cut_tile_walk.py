"""The tile walks of the Gluon forward and backward over a plan cut at the slices, emulated in
torch (float64, small tiles), against the dense reference: each walk reads what the kernel's
boxes read (block_m rows from a q tile's first, block_n keys from a key tile's first, the rows
and keys of the next tiles included), masks only the pairs the plan lists as partial, and keeps
what the kernel keeps. This checks the plan's contract with both kernels on the CPU:

- forward: a short q tile's rows past its end are computed and not stored; a partial pair masks
  the rows' intervals and the keys past a short key tile;
- backward: lse and delta by q tile slot (q_slot_rows: +inf and 0 past a tile's end), so the
  next tile's rows in a box add nothing even on a full pair; dQ added by slot and gathered back
  by row_slots, a partial pair masked from the row table by slot (slot_row_lo / slot_row_hi),
  its rows' interval ends clamped at its key tile's end; dK/dV kept up to the key tile's end.
"""
import random

import pytest
import torch

from magi_attention.common import AttnMaskType, AttnSlice, region_to_slices, to_dense
from magi_attention.kernels.block_sparse import plan_block_sparse
from magi_attention.testing import document_slices, random_slices

D = 8
SCALE = D ** -0.5


def _inputs(seqlen: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(seqlen, D, generator=g, dtype=torch.float64) for _ in range(4)]


def _interval_keep(row_lo, row_hi, rows: torch.Tensor, keys: torch.Tensor,
                   key_end: int) -> torch.Tensor:
    """[rows, keys] cells kept by an interval table's ``rows`` (rows, or slots of a table laid
    out by slot), interval ends clamped at key_end."""
    lo, hi = row_lo[rows].long(), row_hi[rows].long().clamp(max=key_end)
    k = keys[None, :, None]
    return ((k >= lo[:, None, :]) & (k < hi[:, None, :])).any(-1)


def _box(start: int, block: int, seqlen: int) -> torch.Tensor:
    return torch.arange(start, min(start + block, seqlen))


def forward_walk(plan, q, k, v):
    """out and lse as the Gluon forward computes them over ``plan`` (q-major lists)."""
    seqlen = q.shape[0]
    out = torch.zeros_like(q)
    lse = torch.full((seqlen, ), float("-inf"), dtype=q.dtype)
    qs, ptr = plan.q_starts.long(), plan.q_tile_ptr.long()
    klo, khi, nfull = plan.q_tile_klo.long(), plan.q_tile_khi.long(), plan.q_tile_num_full.long()
    for i in range(plan.num_q_tiles):
        rows = _box(int(qs[i]), plan.block_m, seqlen)
        scores = []
        for t in range(int(ptr[i]), int(ptr[i + 1])):
            keys = _box(int(klo[t]), plan.block_n, seqlen)
            s = q[rows] @ k[keys].T * SCALE
            if t - ptr[i] >= nfull[i]:  # partial
                keep = _interval_keep(plan.row_lo, plan.row_hi, rows, keys, int(khi[t]))
                s = s.masked_fill(~keep, float("-inf"))
            scores.append((s, keys))
        if not scores:
            continue
        s = torch.cat([x for x, _ in scores], 1)
        vals = torch.cat([v[keys] for _, keys in scores], 0)
        m = torch.logsumexp(s, 1)
        p = torch.exp(s - m[:, None]).nan_to_num(0.0)
        own = rows < qs[i + 1]  # the rows past a short tile are the next tile's: not stored
        out[rows[own]] = (p @ vals)[own]
        lse[rows[own]] = m[own]
    return out, lse


def backward_walk(plan, q, k, v, dout, out, lse):
    """dq, dk, dv as the Gluon backward computes them over ``plan`` (key-major lists)."""
    seqlen, bm = q.shape[0], plan.block_m
    dk, dv = (torch.zeros_like(x) for x in (k, v))
    delta = (out * dout).sum(1)
    slots = plan.q_slot_rows.long()  # row of each q tile slot, -1 past a tile's end
    dq_slot = torch.zeros(len(slots), D, dtype=q.dtype)
    used = slots >= 0
    lse_slot = torch.full(slots.shape, float("inf"), dtype=q.dtype)
    delta_slot = torch.zeros(slots.shape, dtype=q.dtype)
    lse_slot[used] = torch.where(torch.isinf(lse[slots[used]]), float("inf"), lse[slots[used]])
    delta_slot[used] = delta[slots[used]]
    qs, ks = plan.q_starts.long(), plan.k_starts.long()
    ptr, qt, nfull = plan.k_tile_ptr.long(), plan.k_tile_qt.long(), plan.k_tile_num_full.long()
    for j in range(plan.num_k_tiles):
        keys = _box(int(ks[j]), plan.block_n, seqlen)
        dk_j, dv_j = (torch.zeros(len(keys), D, dtype=q.dtype) for _ in range(2))
        for t in range(int(ptr[j]), int(ptr[j + 1])):
            i = int(qt[t])
            rows = _box(int(qs[i]), bm, seqlen)
            at = i * bm + torch.arange(len(rows))
            p = torch.exp(q[rows] @ k[keys].T * SCALE - lse_slot[at][:, None])
            if t - ptr[j] >= nfull[j]:  # partial
                p = p * _interval_keep(plan.slot_row_lo, plan.slot_row_hi, at, keys,
                                       int(ks[j + 1]))
            dp = dout[rows] @ v[keys].T
            ds = p * (dp - delta_slot[at][:, None])
            dv_j += p.T @ dout[rows]
            dk_j += ds.T @ q[rows] * SCALE
            dq_slot[at] += ds @ k[keys] * SCALE  # the next tile's rows add zeros
        own = keys < ks[j + 1]
        dk[keys[own]], dv[keys[own]] = dk_j[own], dv_j[own]
    return dq_slot[plan.row_slots.long()], dk, dv


def _dense(slices, seqlen, q, k, v, dout):
    keep = to_dense(slices, seqlen, seqlen)
    q, k, v = (x.clone().requires_grad_() for x in (q, k, v))
    s = (q @ k.T * SCALE).masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, 1)
    out = (torch.exp(s - lse[:, None]).nan_to_num(0.0)) @ v
    out.backward(dout)
    return out.detach(), lse.detach(), q.grad, k.grad, v.grad


PATTERNS = {
    "full_document": lambda s: document_slices([70, 90, s - 160], AttnMaskType.FULL),
    "causal_document": lambda s: document_slices([s // 3, s // 5, s - s // 3 - s // 5],
                                            AttnMaskType.CAUSAL),
    "window_in_documents": lambda s: region_to_slices(0, 101, 0, 101, -20, 0)
    + region_to_slices(101, s, 101, s, -33, 5),
    "blocks_of_documents": lambda s: [AttnSlice.make(0, 50, 0, 50, AttnMaskType.CAUSAL),
                                      AttnSlice.make(50, 120, 0, 120, AttnMaskType.CAUSAL),
                                      AttnSlice.make(120, s, 120, s, AttnMaskType.FULL)],
}


def _check(slices, seqlen, seed):
    q, k, v, dout = _inputs(seqlen, seed)
    ref_out, ref_lse, *ref_grads = _dense(slices, seqlen, q, k, v, dout)
    fwd_plan = plan_block_sparse(slices, seqlen, seqlen, 32, 32, cut_at_slices=True)
    out, lse = forward_walk(fwd_plan, q, k, v)
    assert torch.allclose(out, ref_out, atol=1e-10) and torch.equal(torch.isinf(lse),
                                                                    torch.isinf(ref_lse))
    bwd_plan = plan_block_sparse(slices, seqlen, seqlen, 16, 32, cut_at_slices=True)
    for got, ref in zip(backward_walk(bwd_plan, q, k, v, dout, ref_out, ref_lse), ref_grads):
        assert torch.allclose(got, ref, atol=1e-10)


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_cut_tile_walks_match_the_dense_reference(name):
    _check(PATTERNS[name](203), 203, 0)


@pytest.mark.parametrize("seed", range(6))
def test_cut_tile_walks_of_random_overlapping_slices(seed):
    rng = random.Random(seed)
    seqlen = rng.randint(60, 200)
    _check(random_slices(rng, seqlen, seqlen, rng.randint(1, 6)), seqlen, seed)


def test_a_walk_that_ignores_the_next_tiles_rows_would_count_them_twice():
    """The walk is not vacuous: with lse read by row instead of by slot (no +inf past a short
    tile's end), the backward counts the next tile's rows twice and misses the reference."""
    slices = document_slices([70, 90, 43], AttnMaskType.FULL)
    q, k, v, dout = _inputs(203, 0)
    ref_out, ref_lse, *ref_grads = _dense(slices, 203, q, k, v, dout)
    plan = plan_block_sparse(slices, 203, 203, 16, 32, cut_at_slices=True)
    rows_map = plan.q_slot_rows.clone()
    starts = plan.q_starts.long()
    for i in range(plan.num_q_tiles):  # every slot reads its box's own row, past the end too
        box = torch.arange(int(starts[i]), int(starts[i]) + 16).clamp(max=202)
        rows_map[i * 16:(i + 1) * 16] = box.to(rows_map.dtype)
    wrong = type(plan)(**{**plan.__dict__, "q_slot_rows": rows_map})
    dq, dk, dv = backward_walk(wrong, q, k, v, dout, ref_out, ref_lse)
    assert not torch.allclose(dv, ref_grads[2], atol=1e-6)


def test_a_walk_without_the_key_end_clamp_would_count_keys_twice(monkeypatch):
    """Nor is the key-end clamp: rows 50-119 of blocks_of_documents attend across the key cut
    at 50, so a short key tile's box holds keys of the next tile that those rows keep; without
    the clamp they are counted in both tiles."""
    unclamped = _interval_keep
    monkeypatch.setitem(globals(), "_interval_keep",
                        lambda lo, hi, rows, keys, key_end: unclamped(lo, hi, rows, keys, 1 << 30))
    with pytest.raises(AssertionError):
        _check(PATTERNS["blocks_of_documents"](203), 203, 0)
