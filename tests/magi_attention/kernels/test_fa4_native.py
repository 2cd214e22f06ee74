"""Native-form recognition (q/key segment staircase x window) is exact: a form is found only when
FA4's dense/varlen/window masking reproduces the mask cell for cell, and it is found for the
patterns FA4 expresses (CPU; oracle: the slices' dense form, ``to_dense``)."""
import random

import numpy as np
import pytest

from magi_attention.common import AttnMaskType, AttnSlice, slices_to_tensors, to_dense
from magi_attention.kernels.fa4._convert import to_fa4_block_sparse
from magi_attention.kernels.fa4._native import native_dense
from magi_attention.testing.masks import MASK_NAMES, named_mask
from magi_attention.testing.staircase import WINDOWS, random_staircase

EXPRESSIBLE = {"full", "causal", "full_document", "causal_document", "sliding_window",
               "sliding_window_causal"}


def _form(slices, seqlen, seqlen_k=None):
    seqlen_k = seqlen if seqlen_k is None else seqlen_k
    return to_fa4_block_sparse(*slices_to_tensors(slices), seqlen, seqlen_k, 128, 128).native


@pytest.mark.parametrize("name", MASK_NAMES)
def test_found_exactly_when_expressible(name):
    seqlen = 3000
    slices = named_mask(name, seqlen, seed=1)
    form = _form(slices, seqlen)
    if name in EXPRESSIBLE:
        assert form is not None
    if form is not None:
        assert np.array_equal(native_dense(form, seqlen), to_dense(slices, seqlen, seqlen).numpy())


def test_invcausal_is_a_left_window_of_zero():
    slices = [AttnSlice.make(0, 100, 0, 100, AttnMaskType.INVCAUSAL)]
    form = _form(slices, 100)
    assert (form.window_left, form.window_right, form.cu_seqlens_q) == (0, None, None)
    assert np.array_equal(native_dense(form, 100), to_dense(slices, 100, 100).numpy())


@pytest.mark.parametrize("slices", [
    [AttnSlice.make(0, 40, 0, 40), AttnSlice.make(60, 100, 0, 100)],  # empty rows, shared keys
    [AttnSlice.make(0, 100, 0, 40), AttnSlice.make(0, 100, 60, 100)],  # two intervals a row
    [AttnSlice.make(0, 100, 0, 100, AttnMaskType.CAUSAL), AttnSlice.make(0, 50, 0, 60)],  # ragged
], ids=["empty-rows", "two-intervals", "ragged-window"])
def test_not_found_when_not_expressible(slices):
    assert _form(slices, 100) is None


def test_empty_rows_after_a_bottom_right_causal_entry():
    """Rows that keep no key form an entry of no keys (FA4: out 0, lse -inf)."""
    slices = [AttnSlice.make(0, 50, 0, 100, AttnMaskType.CAUSAL)]
    form = _form(slices, 100)
    assert form.cu_seqlens_q == (0, 50, 100) and form.cu_seqlens_k == (0, 100, 100)
    assert np.array_equal(native_dense(form, 100), to_dense(slices, 100, 100).numpy())


def test_square_documents_keep_equal_q_and_k_bounds():
    slices = [AttnSlice.make(a, b, a, b, AttnMaskType.CAUSAL) for a, b in ((0, 30), (30, 100))]
    form = _form(slices, 100)
    assert form.cu_seqlens_q == form.cu_seqlens_k == (0, 30, 100)
    assert (form.max_seqlen_q, form.max_seqlen_k, form.causal) == (70, 70, True)


@pytest.mark.parametrize("kind", WINDOWS)
@pytest.mark.parametrize("seed", range(40))
def test_random_staircase_round_trips(kind, seed):
    rng = random.Random(seed)
    slices, seqlen_q, seqlen_k = random_staircase(rng, rng.randint(1, 6), 40, kind)
    dense = to_dense(slices, seqlen_q, seqlen_k).numpy()
    if not dense.any():
        return
    form = _form(slices, seqlen_q, seqlen_k)
    assert form is not None
    assert np.array_equal(native_dense(form, seqlen_q, seqlen_k), dense)


def test_bottom_right_causal_on_unequal_entries():
    # entry 0: 10 rows x 30 keys (each row sees 21..30 keys); entry 1: 30 rows x 10 keys (the
    # first 20 rows see nothing)
    slices = [AttnSlice.make(0, 10, 0, 30, AttnMaskType.CAUSAL),
              AttnSlice.make(10, 40, 30, 40, AttnMaskType.CAUSAL)]
    form = _form(slices, 40, 40)
    assert form is not None and form.causal
    assert np.array_equal(native_dense(form, 40, 40), to_dense(slices, 40, 40).numpy())


def _row_slices(dense):
    """One FULL slice per run of kept keys of every row."""
    out = []
    for row in range(dense.shape[0]):
        edges = np.flatnonzero(np.diff(np.concatenate([[0], dense[row].astype(int), [0]])))
        out += [AttnSlice.make(row, row + 1, int(a), int(b)) for a, b in edges.reshape(-1, 2)]
    return out


@pytest.mark.parametrize("kind", WINDOWS)
@pytest.mark.parametrize("seed", range(40))
def test_one_cell_off_is_refused_or_exact(kind, seed):
    """Any flipped cell: the form (if any) reproduces the flipped mask exactly; a cell removed
    from inside a row's run (two runs in that row) is always refused."""
    rng = random.Random(seed)
    slices, seqlen_q, seqlen_k = random_staircase(rng, rng.randint(1, 6), 40, kind)
    dense = to_dense(slices, seqlen_q, seqlen_k).numpy()
    flipped = dense.copy()
    q, k = rng.randrange(seqlen_q), rng.randrange(seqlen_k)
    flipped[q, k] = not flipped[q, k]
    form = _form(_row_slices(flipped), seqlen_q, seqlen_k) if flipped.any() else None
    if form is not None:
        assert np.array_equal(native_dense(form, seqlen_q, seqlen_k), flipped)
    inner = np.argwhere(dense[:, :-2] & dense[:, 2:])
    if len(inner):
        q, k = inner[rng.randrange(len(inner))]
        hole = dense.copy()
        hole[q, k + 1] = False
        assert _form(_row_slices(hole), seqlen_q, seqlen_k) is None


def _staircase_dense(entries, seqlen_q, seqlen_k, left, right):
    """Dense mask of (q0, q1, k0, k1) entries under FA4's bottom-right window rule."""
    dense = np.zeros((seqlen_q, seqlen_k), dtype=bool)
    for q0, q1, k0, k1 in entries:
        i, j = np.arange(q1 - q0)[:, None], np.arange(k1 - k0)[None, :]
        keep = np.ones((q1 - q0, k1 - k0), dtype=bool)
        shift = (k1 - k0) - (q1 - q0)
        if left is not None:
            keep &= j >= i + shift - left
        if right is not None:
            keep &= j <= i + shift + right
        dense[q0:q1, k0:k1] = keep
    return dense


NEAR_MISSES = {  # (entries, seqlen_q, seqlen_k, left, right, cell to flip)
    "causal-row-one-key-longer": ([(0, 10, 0, 30), (10, 40, 30, 40)], 40, 40, None, 0, (5, 26)),
    "causal-row-one-key-shorter": ([(0, 10, 0, 30), (10, 40, 30, 40)], 40, 40, None, 0, (35, 34)),
    "full-row-end-cut": ([(0, 20, 0, 5), (20, 30, 5, 40)], 30, 40, None, None, (25, 39)),
    "full-row-start-cut": ([(0, 20, 0, 5), (20, 30, 5, 40)], 30, 40, None, None, (25, 5)),
    "window-row-start-one-later": ([(0, 30, 0, 20), (30, 40, 20, 60)], 40, 60, 3, 2, (35, 51)),
    "window-row-end-one-later": ([(0, 30, 0, 20), (30, 40, 20, 60)], 40, 60, 3, 2, (35, 56)),
    "empty-row-gets-a-key": ([(0, 30, 0, 10), (30, 40, 10, 20)], 40, 20, None, 0, (2, 0)),
}


@pytest.mark.parametrize("case", NEAR_MISSES.values(), ids=NEAR_MISSES.keys())
def test_staircase_one_cell_off_is_refused(case):
    entries, seqlen_q, seqlen_k, left, right, (q, k) = case
    dense = _staircase_dense(entries, seqlen_q, seqlen_k, left, right)
    exact = _form(_row_slices(dense), seqlen_q, seqlen_k)
    assert exact is not None and np.array_equal(native_dense(exact, seqlen_q, seqlen_k), dense)
    dense[q, k] = not dense[q, k]
    assert _form(_row_slices(dense), seqlen_q, seqlen_k) is None


def _groups(slices, seqlen_q, seqlen_k):
    from magi_attention.kernels.fa4._convert import native_groups_of
    from magi_attention.kernels.plan import FlexAttnPlan
    return native_groups_of(FlexAttnPlan.from_slices(slices, seqlen_q, seqlen_k))


def _groups_dense(groups, seqlen_q, seqlen_k):
    """The mask the groups' native calls compute, cell by cell from FA4's semantics."""
    dense = np.zeros((seqlen_q, seqlen_k), dtype=bool)
    covered = np.zeros(seqlen_q, dtype=int)
    for g in groups:
        block = native_dense(g.form, g.q_end - g.q_start, g.k_end - g.k_start)
        dense[g.q_start:g.q_end, g.k_start:g.k_end] |= block
        covered[g.q_start:g.q_end] += 1
    assert (covered == 1).all(), "groups must partition the rows"
    return dense


def test_two_causal_runs_of_a_cp_rank_are_two_native_groups():
    """A CP rank holding the first and the last quarter of a causal mask (balanced_runs at cp 2,
    keys in global order): one form cannot express it (the later run sees the earlier run's
    keys on another diagonal); two calls can."""
    n, a = 400, 100
    slices = [AttnSlice.make(0, a, 0, a, AttnMaskType.CAUSAL),
              AttnSlice.make(a, 2 * a, 0, n, AttnMaskType.CAUSAL)]
    assert _form(slices, 2 * a, n) is None
    groups = _groups(slices, 2 * a, n)
    assert [(g.q_start, g.q_end, g.k_start, g.k_end) for g in groups] == [(0, a, 0, a), (a, 2 * a, 0, n)]
    assert all(g.form.causal for g in groups)
    assert np.array_equal(_groups_dense(groups, 2 * a, n), to_dense(slices, 2 * a, n).numpy())


@pytest.mark.parametrize("kind", WINDOWS)
@pytest.mark.parametrize("seed", range(30))
def test_stacked_staircases_on_shared_keys_round_trip(kind, seed):
    """Up to three staircases stacked on rows whose key spans overlap: found as native groups
    (no more than the limit), and the groups compute exactly the mask."""
    rng = random.Random(seed)
    slices, seqlen_q, seqlen_k = [], 0, 1
    for _ in range(rng.randint(2, 3)):
        part, lq, lk = random_staircase(rng, rng.randint(1, 4), 40, kind)
        shift = rng.randrange(seqlen_k)  # overlaps the keys of the parts above
        slices += [AttnSlice.make(s.q_range.start + seqlen_q, s.q_range.end + seqlen_q,
                                  s.k_range.start + shift, s.k_range.end + shift, s.mask_type)
                   for s in part]
        seqlen_q, seqlen_k = seqlen_q + lq, max(seqlen_k, shift + lk)
    dense = to_dense(slices, seqlen_q, seqlen_k).numpy()
    if not dense.any() or _form(slices, seqlen_q, seqlen_k) is not None:
        return
    groups = _groups(slices, seqlen_q, seqlen_k)
    assert groups is not None  # at most MAX_NATIVE_GROUPS (a greedy cut may split a part)
    assert np.array_equal(_groups_dense(groups, seqlen_q, seqlen_k), dense)


@pytest.mark.parametrize("seed", range(40))
def test_groups_are_exact_or_absent(seed):
    """Any mask (random slices, some overlapping): groups, when found, compute exactly it."""
    rng = random.Random(seed)
    seqlen_q, seqlen_k = rng.randint(20, 80), rng.randint(20, 80)
    slices = []
    for _ in range(rng.randint(1, 5)):
        q0, k0 = rng.randrange(seqlen_q), rng.randrange(seqlen_k)
        q1, k1 = rng.randint(q0 + 1, seqlen_q), rng.randint(k0 + 1, seqlen_k)
        slices.append(AttnSlice.make(q0, q1, k0, k1, rng.choice(list(AttnMaskType))))
    dense = to_dense(slices, seqlen_q, seqlen_k).numpy()
    groups = _groups(slices, seqlen_q, seqlen_k) if dense.any() else None
    if groups is not None:
        assert np.array_equal(_groups_dense(groups, seqlen_q, seqlen_k), dense)


def test_scattered_causal_chunks_stay_block_sparse():
    """min_heap's scattered chunks of causal need a group per chunk: more than the limit, so
    the block-sparse path keeps them (one launch)."""
    from magi_attention.kernels.fa4._native import MAX_NATIVE_GROUPS
    chunks = [7, 2, 5, 0, 3, 6][:MAX_NATIVE_GROUPS + 2]  # global chunk order of the local rows
    c, n = 32, 8 * 32
    slices = [AttnSlice.make(i * c, (i + 1) * c, 0, (g + 1) * c, AttnMaskType.CAUSAL)
              for i, g in enumerate(chunks)]
    assert _form(slices, len(chunks) * c, n) is None
    assert _groups(slices, len(chunks) * c, n) is None
