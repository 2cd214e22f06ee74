"""plan_block_sparse against the dense mask: full tiles fully in, partial tiles neither empty nor
full, every kept cell in a visited tile, transpose and slice lists consistent."""
import random
import time

import numpy as np
import pytest
import torch

from magi_attention.common import (AttnMaskType, AttnSlice, region_to_slices, slices_to_tensors,
                                   to_dense, union_area)
from magi_attention.kernels.block_sparse import (clear_plan_cache, plan_block_sparse,
                                                 plan_from_tensors)
from magi_attention.testing import document_slices, random_slices


PATTERNS = {
    "full": lambda s: [AttnSlice.make(0, s, 0, s)],
    "causal": lambda s: [AttnSlice.make(0, s, 0, s, AttnMaskType.CAUSAL)],
    "sliding_window": lambda s: region_to_slices(0, s, 0, s, -37, 37),
    "sliding_window_causal": lambda s: region_to_slices(0, s, 0, s, -50, 0),
    "causal_document": lambda s: document_slices([s // 3, s // 5, s - s // 3 - s // 5], AttnMaskType.CAUSAL),
    "full_document": lambda s: document_slices([s // 2 + 7, s - s // 2 - 7], AttnMaskType.FULL),
    "global_plus_window": lambda s: [AttnSlice.make(0, 16, 0, s), AttnSlice.make(0, s, 0, 16)]
    + region_to_slices(0, s, 0, s, -20, 20),
}


def check_plan(slices, seqlen_q, seqlen_k, bm, bn):
    plan = plan_block_sparse(slices, seqlen_q, seqlen_k, bm, bn)
    dense = to_dense(slices, seqlen_q, seqlen_k).numpy()
    nqt, nkt = plan.num_q_tiles, plan.num_k_tiles
    pairs = plan.tile_pairs()
    assert plan.area == int(dense.sum()) == union_area(slices)
    for i in range(nqt):
        for j in range(nkt):
            tile = dense[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn]
            if (i, j) not in pairs:
                assert not tile.any(), f"kept cells in skipped tile {(i, j)}"
            elif pairs[(i, j)]:
                assert tile.shape == (bm, bn) and tile.all(), f"full tile {(i, j)} not full"
            else:
                assert tile.any() and not (tile.shape == (bm, bn) and tile.all()), (i, j)
    # transpose lists the same pairs with the same flags, full first then ascending
    kptr, kqt, kfull = (t.numpy() for t in (plan.k_tile_ptr, plan.k_tile_qt, plan.k_tile_num_full))
    seen = {}
    for j in range(nkt):
        seg = kqt[kptr[j]:kptr[j + 1]]
        nf = kfull[j]
        assert list(seg[:nf]) == sorted(seg[:nf]) and list(seg[nf:]) == sorted(seg[nf:])
        for pos, i in enumerate(seg):
            seen[(int(i), j)] = pos < nf
    assert seen == pairs
    # slice lists: every slice with a cell in a partial tile is listed for its q tile and k tile
    qsp, qsi = plan.q_tile_slice_ptr.numpy(), plan.q_tile_slice_idx.numpy()
    ksp, ksi = plan.k_tile_slice_ptr.numpy(), plan.k_tile_slice_idx.numpy()
    for idx, s in enumerate(slices):
        if s.area() == 0:
            continue
        own = to_dense([s], seqlen_q, seqlen_k).numpy()
        for (i, j), is_full in pairs.items():
            if not is_full and own[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn].any():
                assert idx in qsi[qsp[i]:qsp[i + 1]] and idx in ksi[ksp[j]:ksp[j + 1]]
    assert sorted(plan.q_tile_order.tolist()) == list(range(nqt))
    return plan


@pytest.mark.parametrize("name", sorted(PATTERNS))
@pytest.mark.parametrize("tiles", [(16, 16), (32, 16), (16, 64)], ids=lambda t: f"{t[0]}x{t[1]}")
def test_patterns(name, tiles):
    seqlen = 203  # not a multiple of any tile: edge tiles must come out partial
    check_plan(PATTERNS[name](seqlen), seqlen, seqlen, *tiles)


@pytest.mark.parametrize("seed", range(12))
def test_random_overlapping_slices(seed):
    rng = random.Random(seed)
    seqlen_q, seqlen_k = rng.choice([(96, 96), (80, 150), (130, 64)])
    slices = random_slices(rng, seqlen_q, seqlen_k, rng.randint(1, 6))
    check_plan(slices, seqlen_q, seqlen_k, rng.choice([8, 16, 32]), rng.choice([8, 16, 32]))


def test_overlap_counts_once_and_full_tile_from_two_slices():
    # two halves of one tile from different slices make it full; a duplicate slice changes nothing
    slices = [AttnSlice.make(0, 32, 0, 16), AttnSlice.make(0, 32, 16, 32), AttnSlice.make(0, 32, 0, 16)]
    plan = check_plan(slices, 32, 32, 32, 32)
    assert plan.tile_pairs() == {(0, 0): True} and plan.area == 32 * 32


def test_no_slices_and_empty_slices():
    plan = check_plan([AttnSlice.make(5, 5, 0, 10)], 40, 40, 16, 16)
    assert plan.num_tile_pairs == 0 and plan.area == 0


def test_tensors_and_cache():
    clear_plan_cache()
    slices = PATTERNS["causal_document"](300)
    a = plan_from_tensors(*slices_to_tensors(slices), 300, 300, 64, 64)
    b = plan_from_tensors(*slices_to_tensors(slices), 300, 300, 64, 64)
    assert a is b
    c = plan_block_sparse(slices, 300, 300, 64, 64)
    assert torch.equal(a.q_tile_kt, c.q_tile_kt) and a.area == c.area


def test_64k_plans_fast():
    seqlen = 65536
    rng = np.random.default_rng(0)
    lens = [int(x) for x in rng.integers(100, 4000, size=64)]
    keep = int((np.cumsum(lens) < seqlen).sum())
    lens = lens[:keep] + [seqlen - sum(lens[:keep])]
    for slices in (PATTERNS["full"](seqlen), PATTERNS["causal"](seqlen),
                   document_slices(lens, AttnMaskType.CAUSAL), PATTERNS["sliding_window_causal"](seqlen)):
        clear_plan_cache()
        t0 = time.perf_counter()
        plan = plan_block_sparse(slices, seqlen, seqlen, 128, 128)
        elapsed = time.perf_counter() - t0
        assert elapsed < 1.0, f"planning took {elapsed:.2f} s"
        assert plan.area == union_area(slices)
    full = plan_block_sparse(PATTERNS["full"](seqlen), seqlen, seqlen, 128, 128)
    assert full.num_full_pairs == full.num_tile_pairs == 512 * 512
    causal = plan_block_sparse(PATTERNS["causal"](seqlen), seqlen, seqlen, 128, 128)
    assert causal.num_tile_pairs == 512 * 513 // 2 and causal.num_full_pairs == 512 * 511 // 2


@pytest.mark.parametrize("seed", range(6))
def test_row_table_is_the_union(seed):
    rng = random.Random(seed)
    slices = random_slices(rng, 70, 90, rng.randint(1, 5))
    plan = plan_block_sparse(slices, 70, 90, 16, 16)
    dense = to_dense(slices, 70, 90).numpy()
    assert plan.row_lo.shape[1] == plan.max_row_intervals
    k = np.arange(90)
    lo, hi = plan.row_lo.numpy(), plan.row_hi.numpy()
    rebuilt = ((k[None, None, :] >= lo[:, :, None]) & (k[None, None, :] < hi[:, :, None])).any(axis=1)
    assert (rebuilt == dense).all()


def check_cut_plan(slices, seqlen_q, seqlen_k, bm, bn):
    """A plan cut at the slices against the dense mask: tiles of at most bm x bn that start at
    every slice bound, each kept cell in exactly one visited pair of its own tile's rows and
    keys, full pairs full over their own rows and bn keys wide, q_tile_klo and q_tile_khi the
    listed tiles' key spans."""
    plan = plan_block_sparse(slices, seqlen_q, seqlen_k, bm, bn, cut_at_slices=True)
    assert plan.cut_at_slices
    dense = to_dense(slices, seqlen_q, seqlen_k).numpy()
    qs, ks = plan.q_starts.numpy(), plan.k_starts.numpy()
    assert qs[0] == 0 and qs[-1] == seqlen_q and ks[0] == 0 and ks[-1] == seqlen_k
    assert (np.diff(qs) > 0).all() and (np.diff(qs) <= bm).all()
    assert (np.diff(ks) > 0).all() and (np.diff(ks) <= bn).all()
    nonempty = [s for s in slices if s.area()]
    assert {s.q_range.start for s in nonempty} <= set(qs.tolist())
    assert {s.k_range.start for s in nonempty} <= set(ks.tolist())
    pairs = plan.tile_pairs()
    covered = np.zeros_like(dense, dtype=np.int64)
    for (i, j), is_full in pairs.items():
        tile = dense[qs[i]:qs[i + 1], ks[j]:ks[j + 1]]
        assert tile.any(), f"visited pair {(i, j)} holds no kept cell"
        assert is_full == (tile.all() and ks[j + 1] - ks[j] == bn), (i, j)
        covered[qs[i]:qs[i + 1], ks[j]:ks[j + 1]] += 1
    assert (covered[dense] == 1).all(), "a kept cell outside every visited pair or in two"
    assert plan.area == int(dense.sum())
    kt = plan.q_tile_kt.numpy()
    assert (plan.q_tile_klo.numpy() == ks[kt]).all() and (plan.q_tile_khi.numpy() == ks[kt + 1]).all()
    slots = plan.q_slot_rows.numpy().reshape(-1, bm)
    width = plan.row_lo.shape[1]
    slot_lo, slot_hi = (x.numpy().reshape(-1, bm, width) for x in (plan.slot_row_lo,
                                                                   plan.slot_row_hi))
    row_slots = plan.row_slots.numpy()
    for t in range(plan.num_q_tiles):
        own = np.arange(qs[t], qs[t + 1])
        assert (slots[t, :len(own)] == own).all() and (slots[t, len(own):] == -1).all()
        # the row table by slot: each own row's intervals, none past the end; rows find it back
        assert (slot_lo[t, :len(own)] == plan.row_lo.numpy()[own]).all()
        assert (slot_hi[t, :len(own)] == plan.row_hi.numpy()[own]).all()
        assert (slot_lo[t, len(own):] == 0).all() and (slot_hi[t, len(own):] == 0).all()
        assert (row_slots[own] == t * bm + np.arange(len(own))).all()
    return plan


@pytest.mark.parametrize("name", sorted(PATTERNS))
@pytest.mark.parametrize("tiles", [(16, 16), (32, 16), (16, 64)], ids=lambda t: f"{t[0]}x{t[1]}")
def test_cut_plans(name, tiles):
    check_cut_plan(PATTERNS[name](203), 203, 203, *tiles)


@pytest.mark.parametrize("seed", range(8))
def test_cut_plans_of_random_overlapping_slices(seed):
    rng = random.Random(seed)
    sq, sk = rng.randint(40, 300), rng.randint(40, 300)
    check_cut_plan(random_slices(rng, sq, sk, rng.randint(1, 7)), sq, sk, 32, 16)


def test_cut_plan_of_documents_visits_fewer_pairs_and_the_grid_plan_is_its_own():
    """Documents of a few hundred to a few thousand tokens off the 128 grid: the cut plan's
    tiles hold no cells of a neighbour, so it visits fewer pairs than the grid plan (762 -> 682
    full, 406 -> 367 causal) with two more q tiles; a grid plan's starts and key spans are the
    grid's."""
    docs = [300, 1000, 700, 2500, 150, 1634]
    n = sum(docs)
    for mask_type, pairs in ((AttnMaskType.FULL, (762, 682)), (AttnMaskType.CAUSAL, (406, 367))):
        slices = document_slices(docs, mask_type)
        grid = plan_block_sparse(slices, n, n, 128, 128)
        cut = plan_block_sparse(slices, n, n, 128, 128, cut_at_slices=True)
        assert (grid.num_tile_pairs, cut.num_tile_pairs) == pairs
        assert (grid.num_q_tiles, cut.num_q_tiles) == (50, 52)
    slices = document_slices([70, 90, 43], AttnMaskType.FULL)
    grid = check_plan(slices, 203, 203, 32, 32)
    assert grid.q_starts.tolist() == [0, 32, 64, 96, 128, 160, 192, 203] and not grid.cut_at_slices
    kt = grid.q_tile_kt.numpy()
    assert (grid.q_tile_klo.numpy() == kt * 32).all()
    assert (grid.q_tile_khi.numpy() == np.minimum(kt * 32 + 32, 203)).all()
    assert grid.q_slot_rows.numel() == 0 and grid.row_slots.numel() == 0
    assert grid.slot_row_lo.numel() == 0 and grid.slot_row_hi.numel() == 0
